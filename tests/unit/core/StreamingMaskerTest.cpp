#include <gtest/gtest.h>

#include <random>

#include "core/StreamingMasker.hpp"

namespace airlock {
namespace {

TEST(StreamingMasker, MasksSecretsSplitAcrossChunksAnywhere) {
    auto masker = std::make_shared<const SecretMasker>(
        std::vector<std::string>{"s3cr3t-Value-9137", "abcab-abcab"});
    std::string text =
        "token=s3cr3t-Value-9137; again s3cr3t-Value-9137, tricky abcabcab-abcab-abcab end";
    std::string expected = masker->mask(text);
    ASSERT_EQ(expected.find("s3cr3t"), std::string::npos);
    std::mt19937 rng(42);
    for (int round = 0; round < 500; ++round) {
        StreamingMasker stream(masker);
        std::string shown;
        for (std::size_t pos = 0; pos < text.size();) {
            std::size_t n = std::min<std::size_t>(text.size() - pos, 1 + rng() % 7);
            std::string out = stream.feed(std::string_view(text).substr(pos, n));
            EXPECT_EQ(out.find("s3cr3t-Value"), std::string::npos);
            shown += out;
            pos += n;
        }
        shown += stream.flush();
        EXPECT_EQ(shown, expected) << "round " << round;
        EXPECT_EQ(shown.find("9137"), std::string::npos);
    }
}

TEST(StreamingMasker, OverlappingSecretsAreMaskedTogether) {
    auto masker =
        std::make_shared<const SecretMasker>(std::vector<std::string>{"abcdefghx", "xyz123456"});
    std::string text = "head abcdefghxyz123456 tail xyz123456 and abcdefghx.";
    EXPECT_EQ(masker->mask(text), "head *** tail *** and ***.");
    std::mt19937 rng(7);
    for (int round = 0; round < 300; ++round) {
        StreamingMasker stream(masker);
        std::string shown;
        for (std::size_t pos = 0; pos < text.size();) {
            std::size_t n = std::min<std::size_t>(text.size() - pos, 1 + rng() % 9);
            shown += stream.feed(std::string_view(text).substr(pos, n));
            pos += n;
        }
        shown += stream.flush();
        EXPECT_EQ(shown, "head *** tail *** and ***.") << "round " << round;
    }
}

TEST(StreamingMasker, HoldsBackOnlyWhatCouldStartASecret) {
    auto masker =
        std::make_shared<const SecretMasker>(std::vector<std::string>{"s3cr3t-Value-9137"});
    StreamingMasker stream(masker);
    EXPECT_EQ(stream.feed("user@sandbox:~$ "), "user@sandbox:~$ ") << "a prompt shows at once";
    EXPECT_EQ(stream.feed("echo s3cr"), "echo ");
    EXPECT_EQ(stream.held(), 4u);
    EXPECT_EQ(stream.feed("3t-Value-9137\n"), "***\n");
    EXPECT_EQ(stream.feed("s3c"), "");
    EXPECT_EQ(stream.flush(), "s3c") << "at the end a mere beginning is shown as it is";
    StreamingMasker none(std::make_shared<const SecretMasker>());
    EXPECT_EQ(none.feed("anything"), "anything");
}

// A process's output ring overran: the bytes after the gap may start in the
// middle of a secret, and the bytes held before it may be a secret's start.
TEST(StreamingMasker, AfterAGapTheRestOfASecretIsMaskedInAnyChunking) {
    auto masker =
        std::make_shared<const SecretMasker>(std::vector<std::string>{"s3cr3t-Value-9137"});
    std::string after =
        "lue-9137 then plain text that is long enough to decide, s3cr3t-Value-9137 end";
    std::mt19937 rng(3);
    for (int round = 0; round < 300; ++round) {
        StreamingMasker stream(masker);
        std::string shown = stream.feed("line before\n");
        shown += stream.gap();
        for (std::size_t pos = 0; pos < after.size();) {
            std::size_t n = std::min<std::size_t>(after.size() - pos, 1 + rng() % 11);
            std::string out = stream.feed(std::string_view(after).substr(pos, n));
            EXPECT_EQ(out.find("9137"), std::string::npos) << "round " << round;
            shown += out;
            pos += n;
        }
        shown += stream.flush();
        EXPECT_EQ(shown, "line before\n*** then plain text that is long enough to decide, *** end")
            << "round " << round;
    }
}

TEST(StreamingMasker, AtAGapAHeldBeginningIsMaskedAndPlainTextPassesUnchanged) {
    auto masker =
        std::make_shared<const SecretMasker>(std::vector<std::string>{"s3cr3t-Value-9137"});
    StreamingMasker stream(masker);
    EXPECT_EQ(stream.feed("x s3cr3t-Va"), "x ");
    EXPECT_EQ(stream.gap(), "***") << "the beginning of a secret whose rest was dropped";
    EXPECT_EQ(stream.feed("ok\n"), "") << "too short to tell yet";
    EXPECT_EQ(stream.gap(), "ok\n") << "a second gap decides the first one's head";
    EXPECT_EQ(stream.feed("plain"), "");
    EXPECT_EQ(stream.flush(), "plain");
    StreamingMasker none(std::make_shared<const SecretMasker>());
    EXPECT_EQ(none.gap(), "");
    EXPECT_EQ(none.feed("lue-9137"), "lue-9137");
}

}  // namespace
}  // namespace airlock

#include <gtest/gtest.h>

#include "egress/AnswerMasker.hpp"

namespace airlock::egress {
namespace {

std::string fedInPieces(AnswerMasker& m, const std::string& text, std::size_t piece) {
    std::string out;
    for (std::size_t at = 0; at < text.size(); at += piece) out += m.feed(text.substr(at, piece));
    return out + m.flush();
}

TEST(AnswerMasker, AValueSplitAcrossReadsIsMaskedAndLengthsStay) {
    std::string text =
        "{\"headers\":{\"Authorization\":\"Bearer sk-live-123456\"},\"k\":\"key-abcdefgh\"}";
    for (std::size_t piece = 1; piece <= text.size(); ++piece) {
        AnswerMasker m({"sk-live-123456", "key-abcdefgh"});
        std::string masked = fedInPieces(m, text, piece);
        EXPECT_EQ(masked.size(), text.size()) << piece;
        EXPECT_EQ(masked.find("sk-live"), std::string::npos) << piece;
        EXPECT_EQ(masked.find("key-abc"), std::string::npos) << piece;
        EXPECT_EQ(
            masked,
            "{\"headers\":{\"Authorization\":\"Bearer **************\"},\"k\":\"************\"}")
            << piece;
    }
}

// What is held back depends on how much came, never on what: a prefix of a
// value is held exactly as long as any other bytes.
TEST(AnswerMasker, TheHoldBackIsTheSameWhateverTheBytes) {
    AnswerMasker prefix({"secret-Value-01"}), other({"secret-Value-01"});
    EXPECT_EQ(prefix.feed("xxxxxxxxxxxxxxxxxxxxsecret-Val").size(),
              other.feed("xxxxxxxxxxxxxxxxxxxxyyyyyyyyyy").size());
    EXPECT_EQ(prefix.flush().size(), other.flush().size());
    EXPECT_FALSE(prefix.holding());
}

// A flush in the middle of a value (the host paused there) lets its start
// go; the rest is masked when it comes: the guest never has the whole.
TEST(AnswerMasker, AValueWhoseStartWentHasItsRestMasked) {
    AnswerMasker m({"secret-Value-01"});
    std::string out = m.feed("echo: secret-Va");
    out += m.flush();
    EXPECT_EQ(out, "echo: secret-Va");
    out += m.feed("lue-01 and more text after it");
    out += m.flush();
    EXPECT_EQ(out, "echo: secret-Va****** and more text after it");
}

TEST(AnswerMasker, WithoutValuesBytesPassAtOnce) {
    AnswerMasker none({});
    EXPECT_EQ(none.feed("abc"), "abc");
    EXPECT_FALSE(none.holding());
    EXPECT_EQ(none.flush(), "");
}

}  // namespace
}  // namespace airlock::egress

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

#include "core/Error.hpp"
#include "core/GzipDeflater.hpp"
#include "core/GzipInflater.hpp"

namespace airlock {
namespace {

std::string inflateAll(const std::string& gz, std::size_t feedSize, std::size_t piece) {
    GzipInflater in;
    std::string out;
    for (std::size_t i = 0; i < gz.size(); i += feedSize) {
        in.feed(std::string_view(gz).substr(i, feedSize));
        while (in.pending()) {
            auto p = in.next(piece);
            EXPECT_LE(p.size(), piece);
            out += p;
        }
    }
    in.finish();
    return out;
}

std::string sample() {
    std::string s;
    for (int i = 0; i < 200000; ++i) s += static_cast<char>((i * 7919) % 251);
    return s;
}

TEST(Gzip, WhatIsDeflatedInPiecesInflatesBackWhateverTheChunking) {
    GzipDeflater out;
    std::string data = sample(), gz;
    for (std::size_t i = 0; i < data.size(); i += 10000) gz += out.add(data.substr(i, 10000));
    gz += out.finish();
    EXPECT_EQ(inflateAll(gz, gz.size(), 1 << 20), data);
    EXPECT_EQ(inflateAll(gz, 1, 4096), data);
    EXPECT_EQ(inflateAll(gz, 777, 100), data);
    EXPECT_THROW(out.add("more"), Error);
}

TEST(Gzip, EachAddIsReadableAtOnce) {
    // A slow file's bytes reach the client as they come, not at the end.
    GzipDeflater out;
    std::string first = out.add("hello");
    GzipInflater in;
    in.feed(first);
    EXPECT_EQ(in.next(100), "hello");
}

TEST(Gzip, ConcatenatedMembersAreOneStream) {
    GzipDeflater a, b;
    std::string gz = a.add("one ");
    gz += a.finish();
    gz += b.add("two");
    gz += b.finish();
    EXPECT_EQ(inflateAll(gz, gz.size(), 64), "one two");
}

TEST(Gzip, ABombIsUndoneOnlyAsFastAsItIsTaken) {
    // 64 MiB of zeros is about 64 KiB of gzip; each call gives at most its piece.
    GzipDeflater out;
    std::string zeros(1 << 20, '\0'), gz;
    for (int i = 0; i < 64; ++i) gz += out.add(zeros);
    gz += out.finish();
    ASSERT_LT(gz.size(), 1u << 20);
    GzipInflater in;
    in.feed(gz);
    std::size_t total = 0, calls = 0;
    while (in.pending()) {
        auto p = in.next(256 * 1024);
        ASSERT_LE(p.size(), 256u * 1024);
        total += p.size();
        ++calls;
    }
    EXPECT_EQ(total, 64u << 20);
    EXPECT_GE(calls, 256u);
}

TEST(Gzip, ABodyThatIsNotGzipOrIsCutShortIsABadRequest) {
    GzipInflater notGzip;
    notGzip.feed("this is plain text, not gzip");
    try {
        while (notGzip.pending()) notGzip.next(100);
        FAIL() << "plain text inflated";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::bad_request);
    }
    GzipDeflater out;
    std::string gz = out.add(sample());
    gz += out.finish();
    GzipInflater cut;
    cut.feed(gz.substr(0, gz.size() - 5));
    while (cut.pending()) cut.next(1 << 20);
    try {
        cut.finish();
        FAIL() << "a cut body finished";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::bad_request);
    }
    GzipInflater trailing;
    trailing.feed(gz + "garbage after the member");
    EXPECT_THROW(
        {
            while (trailing.pending()) trailing.next(1 << 20);
        },
        Error);
}

}  // namespace
}  // namespace airlock

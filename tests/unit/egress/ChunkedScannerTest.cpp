// Where a chunked request body ends, as its bytes stream past in pieces of
// any size; what no honest client sends is refused.
#include <gtest/gtest.h>

#include "egress/ChunkedScanner.hpp"

namespace airlock::egress {
namespace {

TEST(ChunkedScanner, TheEndIsFoundWhateverTheBytesArriveIn) {
    const std::string body = "5\r\nhello\r\nA;ext=1\r\n0123456789\r\n0\r\n\r\n";
    const std::string next = "GET /next HTTP/1.1\r\n";
    for (std::size_t piece = 1; piece <= body.size() + next.size(); ++piece) {
        ChunkedScanner scanner;
        std::string stream = body + next;
        std::size_t consumed = 0;
        bool done = false;
        while (!done && consumed < stream.size()) {
            std::size_t used = 0;
            auto r = scanner.scan(std::string_view(stream).substr(consumed, piece), used);
            ASSERT_NE(r, ChunkedScanner::Result::error) << scanner.error();
            consumed += used;
            done = r == ChunkedScanner::Result::done;
        }
        EXPECT_TRUE(done) << "pieces of " << piece;
        EXPECT_EQ(consumed, body.size()) << "the next request is not the body's";
    }
}

TEST(ChunkedScanner, WhatNoHonestClientSendsIsRefused) {
    for (const std::string& bad :
         {std::string("x\r\n"), std::string("5\r\nhelloXX"), std::string("5\nhello\r\n"),
          std::string("0\r\nTrailer: airlock-secret-x\r\n\r\n"),
          std::string("1234567890abcdef0\r\n"), std::string("5;") + std::string(2000, 'e') + "\r\n",
          std::string("\r\n")}) {
        ChunkedScanner scanner;
        std::size_t used = 0;
        EXPECT_EQ(scanner.scan(bad, used), ChunkedScanner::Result::error) << bad.substr(0, 40);
        EXPECT_FALSE(scanner.error().empty());
        // Once refused, always.
        EXPECT_EQ(scanner.scan("0\r\n\r\n", used), ChunkedScanner::Result::error);
    }
}

TEST(ChunkedScanner, ABigChunkIsCountedNotKept) {
    ChunkedScanner scanner;
    std::size_t used = 0;
    EXPECT_EQ(scanner.scan("100000\r\n", used), ChunkedScanner::Result::more);
    std::string mib(1 << 20, 'x');
    EXPECT_EQ(scanner.scan(mib, used), ChunkedScanner::Result::more);
    EXPECT_EQ(used, mib.size());
    EXPECT_EQ(scanner.scan("\r\n0\r\n\r\n", used), ChunkedScanner::Result::done);
    EXPECT_EQ(used, 7u);
}

}  // namespace
}  // namespace airlock::egress

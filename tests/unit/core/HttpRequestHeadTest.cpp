// The one request-head parser of airlockd's guest-facing proxies (egress,
// packages): what it takes, and everything it refuses with its status.
#include <gtest/gtest.h>

#include "core/HttpRequestHead.hpp"

namespace airlock {
namespace {

using Status = HttpRequestHeadParser::Status;

TEST(HttpRequestHead, TakesOneHeadAndSaysWhereItEnds) {
    HttpRequestHeadParser parser;
    HttpRequestHead head;
    std::size_t length = 0;
    std::string sent =
        "GET /pkg/-/pkg-1.0.0.tgz HTTP/1.1\r\nHost: 127.0.0.1:4873\r\nAccept:  application/json "
        "\r\nX-Twice: first\r\nx-twice: second\r\n\r\nBODY";
    ASSERT_EQ(parser.parse(sent, head, length), Status::complete) << parser.error();
    EXPECT_EQ(length, sent.size() - 4);
    EXPECT_EQ(head.method, "GET");
    EXPECT_EQ(head.target, "/pkg/-/pkg-1.0.0.tgz");
    EXPECT_EQ(head.version, "HTTP/1.1");
    ASSERT_EQ(head.headers.size(), 4u);
    EXPECT_EQ(head.header("accept"), "application/json");
    EXPECT_EQ(head.header("x-twice"), "first") << "the first of a repeated header";
    EXPECT_EQ(head.headers[1].line, "Accept:  application/json ") << "the line as sent";
    EXPECT_FALSE(head.header("cookie"));
    // Bare LF line ends, and a head that has not ended yet.
    ASSERT_EQ(parser.parse("HEAD / HTTP/1.0\nA: b\n\n", head, length), Status::complete);
    EXPECT_EQ(length, 22u);
    EXPECT_EQ(parser.parse("GET / HTTP/1.1\r\nHost: x\r\n", head, length), Status::need_more);
}

TEST(HttpRequestHead, RefusesWhatSomeServerWouldReadDifferently) {
    auto refused = [](const std::string& sent) {
        HttpRequestHeadParser parser;
        HttpRequestHead head;
        std::size_t length = 0;
        EXPECT_EQ(parser.parse(sent, head, length), Status::error) << sent.substr(0, 60);
        EXPECT_FALSE(parser.error().empty());
        return parser.errorStatus();
    };
    EXPECT_EQ(refused("GET / HTTP/1.1\r\nX: a\rInjected: b\r\n\r\n"), 400);
    EXPECT_EQ(refused(std::string("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n", 26)), 400);
    EXPECT_EQ(refused("GET / HTTP/1.1\r\nX: 1\r\n folded\r\n\r\n"), 400);
    EXPECT_EQ(refused("GET / HTTP/1.1\r\nNoColon\r\n\r\n"), 400);
    EXPECT_EQ(refused("GET / HTTP/1.1\r\n: empty name\r\n\r\n"), 400);
    EXPECT_EQ(refused("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n"), 400);
    EXPECT_EQ(refused("get / HTTP/1.1\r\n\r\n"), 400);
    EXPECT_EQ(refused("GET /a\x01z HTTP/1.1\r\n\r\n"), 400);
    EXPECT_EQ(refused("GET HTTP/1.1\r\n\r\n"), 400);
    EXPECT_EQ(refused("GET / HTTP/2\r\n\r\n"), 505);
    EXPECT_EQ(refused("GET / HTTP/1.1\r\nX: " + std::string(HttpRequestHeadParser::kMaxHead, 'a') +
                      "\r\n\r\n"),
              431);
    EXPECT_EQ(refused("GET / HTTP/1.1\r\n" + std::string(HttpRequestHeadParser::kMaxHead + 1, 'a')),
              431);
    std::string many = "GET / HTTP/1.1\r\n";
    for (int i = 0; i < 101; ++i) many += "X: 1\r\n";
    EXPECT_EQ(refused(many + "\r\n"), 431);
}

}  // namespace
}  // namespace airlock

// The pure parts of egress: allowlist entries, which addresses may be
// dialled, the proxy-request parser and the bandwidth bucket.
#include <gtest/gtest.h>

#include "core/Error.hpp"
#include "core/HttpRequestHead.hpp"
#include "egress/AddressPolicy.hpp"
#include "egress/EgressAllowlist.hpp"
#include "egress/ProxyRequest.hpp"
#include "egress/TokenBucket.hpp"
#include "support/TestEnv.hpp"

namespace airlock::egress {
namespace {
using test::codeOf;
namespace ip = boost::asio::ip;

ip::address addr(const std::string& s) { return ip::make_address(s); }

TEST(EgressAllowlist, NormalizesAndMatchesHostNames) {
    auto list =
        EgressAllowlist::parse({"Packages.Example.COM.", "*.example.org", "registry.local:5000",
                                "[2001:DB8::1]:8443", "203.0.113.7"});
    EXPECT_EQ(list.texts(), (std::vector<std::string>{"packages.example.com", "*.example.org",
                                                      "registry.local:5000", "[2001:db8::1]:8443",
                                                      "203.0.113.7"}));
    EXPECT_TRUE(list.allows("packages.example.com", 443));
    EXPECT_TRUE(list.allows("packages.example.com", 80));
    EXPECT_FALSE(list.allows("packages.example.com", 8080))
        << "only 80 and 443 without a listed port";
    EXPECT_TRUE(list.hostListed("packages.example.com"));
    EXPECT_FALSE(list.hostListed("evil-packages.example.com"));
    EXPECT_FALSE(list.hostListed("packages.example.com.evil.net"));
    // A wildcard covers every name below the domain, never the domain itself
    // nor a name that merely ends in the same letters.
    EXPECT_TRUE(list.allows("a.example.org", 443));
    EXPECT_TRUE(list.allows("deep.a.example.org", 443));
    EXPECT_FALSE(list.hostListed("example.org"));
    EXPECT_FALSE(list.hostListed("badexample.org"));
    EXPECT_TRUE(list.allows("registry.local", 5000));
    EXPECT_FALSE(list.allows("registry.local", 443))
        << "an entry with a port allows that port only";
    EXPECT_TRUE(list.allows("2001:db8::1", 8443));
    EXPECT_TRUE(list.allows("203.0.113.7", 80));
}

TEST(EgressAllowlist, RejectsWhatCannotBeAHost) {
    for (const char* bad :
         {"", "*", "*.com", "exa mple.com", "host:0", "host:99999", "host:", "a..b", "-a.com",
          "2130706433", "0x7f.1", "017.0.0.1x", "foo*.example.com", "*.*.example.com", "[::1",
          "[::1]x", "http://example.com", "example.com/path", "user@example.com"})
        EXPECT_EQ(codeOf([&] { EgressAllowlist::parse({bad}); }), ErrorCode::bad_request)
            << "entry: " << bad;
    std::vector<std::string> tooMany(EgressAllowlist::kMaxEntries + 1, "example.com");
    EXPECT_EQ(codeOf([&] { EgressAllowlist::parse(tooMany); }), ErrorCode::bad_request);
    EXPECT_TRUE(EgressAllowlist::parse({}).empty());
}

TEST(AddressPolicy, RefusesEverySpecialPurposeRange) {
    AddressPolicy policy;
    const std::pair<const char*, const char*> refused[] = {
        {"127.0.0.1", "loopback"},
        {"127.255.0.9", "loopback"},
        {"10.1.2.3", "private"},
        {"172.16.0.1", "private"},
        {"172.31.255.255", "private"},
        {"192.168.1.1", "private"},
        {"100.64.0.1", "CGNAT"},
        {"100.127.255.254", "CGNAT"},
        {"169.254.169.254", "cloud metadata"},
        {"169.254.1.1", "link-local"},
        {"0.0.0.0", "unspecified"},
        {"224.0.0.1", "multicast"},
        {"255.255.255.255", "reserved"},
        {"198.18.0.1", "benchmarking"},
        {"::1", "loopback"},
        {"::", "unspecified"},
        {"fe80::1", "link-local"},
        {"fd00:ec2::254", "private"},
        {"fc00::1", "private"},
        {"ff02::1", "multicast"},
        // IPv4 hidden in IPv6: mapped, NAT64 and 6to4 carry it to an IPv4 host.
        {"::ffff:127.0.0.1", "loopback"},
        {"::ffff:10.0.0.1", "private"},
        {"64:ff9b::a9fe:a9fe", "cloud metadata"},
        {"2002:7f00:1::", "loopback"},
        {"2001:db8::1", "documentation"},
        {"2001:0:4136:e378::1", "Teredo"},
        {"64:ff9b:1::a00:1", "local NAT64"},
    };
    for (const auto& [a, what] : refused) {
        auto why = policy.refusal(addr(a));
        ASSERT_TRUE(why.has_value()) << a;
        EXPECT_NE(why->find(what), std::string::npos) << a << " -> " << *why;
    }
    for (const char* ok : {"8.8.8.8", "93.184.216.34", "172.32.0.1", "100.128.0.1",
                           "2606:4700::1111", "::ffff:8.8.8.8", "2002:0808:0808::"})
        EXPECT_FALSE(policy.refusal(addr(ok)).has_value()) << ok;
}

TEST(AddressPolicy, OperatorRangesOpenExactlyWhatTheySay) {
    AddressPolicy policy({CidrRange::parse("127.0.0.1/32"), CidrRange::parse("10.20.0.0/16"),
                          CidrRange::parse("fd00::/8")});
    EXPECT_FALSE(policy.refusal(addr("127.0.0.1")).has_value());
    EXPECT_TRUE(policy.refusal(addr("127.0.0.2")).has_value());
    EXPECT_FALSE(policy.refusal(addr("10.20.255.1")).has_value());
    EXPECT_TRUE(policy.refusal(addr("10.21.0.1")).has_value());
    EXPECT_FALSE(policy.refusal(addr("fd12::1")).has_value());
    EXPECT_TRUE(policy.refusal(addr("fe80::1")).has_value());
    EXPECT_FALSE(policy.refusal(addr("::ffff:127.0.0.1")).has_value())
        << "a mapped address is its IPv4 one";
    EXPECT_TRUE(policy.operatorAllowed(addr("127.0.0.1")));
    EXPECT_FALSE(policy.operatorAllowed(addr("8.8.8.8")));
    EXPECT_EQ(CidrRange::parse("10.0.0.7").text(), "10.0.0.7/32");
    EXPECT_TRUE(CidrRange::parse("0.0.0.0/0").contains(addr("1.2.3.4")));
    for (const char* bad :
         {"", "10.0.0.0/33", "fd00::/129", "10.0.0/8", "example.com/8", "10.0.0.0/", "10.0.0.0/-1"})
        EXPECT_EQ(codeOf([&] { CidrRange::parse(bad); }), ErrorCode::bad_request) << bad;
}

ProxyRequestParser::Status parse(const std::string& head, ProxyRequest& r,
                                 ProxyRequestParser* p = nullptr) {
    ProxyRequestParser local;
    std::size_t len = 0;
    return (p ? *p : local).parse(head, r, len);
}

TEST(ProxyRequest, ParsesConnect) {
    ProxyRequest r;
    ASSERT_EQ(
        parse("CONNECT Pkgs.Example.ORG:443 HTTP/1.1\r\nHost: pkgs.example.org:443\r\n\r\n", r),
        ProxyRequestParser::Status::complete);
    EXPECT_TRUE(r.connect);
    EXPECT_EQ(r.host, "pkgs.example.org");
    EXPECT_EQ(r.port, 443);
    EXPECT_EQ(r.destination(), "pkgs.example.org:443");
    ASSERT_EQ(parse("CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n", r),
              ProxyRequestParser::Status::complete);
    EXPECT_EQ(r.host, "2001:db8::1");
    EXPECT_EQ(r.destination(), "[2001:db8::1]:8443");
}

TEST(ProxyRequest, RewritesPlainHttpForTheCheckedHostOnly) {
    ProxyRequest r;
    ProxyRequestParser p;
    std::size_t len = 0;
    std::string head =
        "GET http://user:pw@Example.com:8080/a/b?q=1#frag HTTP/1.1\r\nHost: evil.example.net\r\n"
        "Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nConnection: "
        "keep-alive\r\nAccept: */*\r\n\r\nBODY";
    ASSERT_EQ(p.parse(head, r, len), ProxyRequestParser::Status::complete);
    EXPECT_EQ(len, head.size() - 4) << "the body is not part of the head";
    EXPECT_FALSE(r.connect);
    EXPECT_EQ(r.host, "example.com");
    EXPECT_EQ(r.port, 8080);
    EXPECT_EQ(r.upstreamHead,
              "GET /a/b?q=1 HTTP/1.1\r\nAccept: */*\r\nHost: example.com:8080\r\nConnection: "
              "close\r\n\r\n");
    ASSERT_EQ(parse("GET http://example.com?q=1 HTTP/1.1\r\n\r\n", r),
              ProxyRequestParser::Status::complete);
    EXPECT_EQ(r.upstreamHead.substr(0, r.upstreamHead.find("\r\n")), "GET /?q=1 HTTP/1.1");
    ASSERT_EQ(parse("GET http://example.com HTTP/1.0\n\n", r),
              ProxyRequestParser::Status::complete);
    EXPECT_EQ(r.port, 80);
    EXPECT_EQ(r.upstreamHead, "GET / HTTP/1.0\r\nHost: example.com\r\nConnection: close\r\n\r\n");
}

TEST(ProxyRequest, WaitsForAWholeHeadAndRefusesBadOnes) {
    ProxyRequest r;
    EXPECT_EQ(parse("GET http://example.com/ HTTP/1.1\r\nHost: exa", r),
              ProxyRequestParser::Status::need_more);
    EXPECT_EQ(parse("", r), ProxyRequestParser::Status::need_more);
    auto expectError = [&](const std::string& head, int status) {
        ProxyRequestParser p;
        EXPECT_EQ(parse(head, r, &p), ProxyRequestParser::Status::error) << head.substr(0, 80);
        EXPECT_EQ(p.errorStatus(), status) << head << ": " << p.error();
    };
    expectError("GET /relative HTTP/1.1\r\n\r\n", 400);
    expectError("GET https://example.com/ HTTP/1.1\r\n\r\n", 400);
    expectError("GET ftp://example.com/ HTTP/1.1\r\n\r\n", 400);
    expectError("CONNECT example.com HTTP/1.1\r\n\r\n", 400);
    expectError("CONNECT example.com:0 HTTP/1.1\r\n\r\n", 400);
    expectError("CONNECT 2130706433:443 HTTP/1.1\r\n\r\n", 400);
    expectError("CONNECT 0x7f.1:443 HTTP/1.1\r\n\r\n", 400);
    expectError("GET http://exa mple.com/ HTTP/1.1\r\n\r\n", 400);
    expectError("get http://example.com/ HTTP/1.1\r\n\r\n", 400);
    expectError("GET http://example.com/ HTTP/2.0\r\n\r\n", 505);
    expectError("GET http://example.com/ HTTP/1.1\r\nNoColon\r\n\r\n", 400);
    expectError("GET http://example.com/ HTTP/1.1\r\nX: a\rHost: evil\r\n\r\n", 400);
    expectError(std::string("GET http://example.com/ HTTP/1.1\r\nX: a\0b\r\n\r\n", 44), 400);
    expectError("GET http://example.com/ HTTP/1.1\r\nX: 1\r\n folded\r\n\r\n", 400);
    expectError("GET http://example.com/ HTTP/1.1\r\nX-Big: " +
                    std::string(HttpRequestHeadParser::kMaxHead, 'a') + "\r\n\r\n",
                431);
    expectError(
        "GET http://example.com/ HTTP/1.1\r\n" + std::string(HttpRequestHeadParser::kMaxHead + 1, 'a'),
        431);
    std::string many = "GET http://example.com/ HTTP/1.1\r\n";
    for (int i = 0; i < 101; ++i) many += "X: 1\r\n";
    expectError(many + "\r\n", 431);
}

TEST(TokenBucket, LetsABurstThroughThenPacesToTheRate) {
    using namespace std::chrono_literals;
    auto t0 = TokenBucket::Clock::now();
    TokenBucket bucket(1000, t0);  // bytes per second, one second of burst
    EXPECT_EQ(bucket.take(600, t0), 0ns);
    EXPECT_EQ(bucket.take(400, t0), 0ns);
    EXPECT_EQ(bucket.take(500, t0), 500ms) << "500 bytes over: half a second at 1000 B/s";
    EXPECT_EQ(bucket.take(0, t0 + 500ms), 0ns) << "paid back";
    EXPECT_EQ(bucket.take(100, t0 + 600ms), 0ns);
    EXPECT_EQ(bucket.take(5000, t0 + 100s), 4000ms) << "idle time refills one burst, not more";
}

}  // namespace
}  // namespace airlock::egress

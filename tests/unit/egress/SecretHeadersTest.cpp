// The head of a request the egress proxy adds a secret to: the secret only
// for its hosts, another host's placeholder refused, and hostile heads
// (folds, two Hosts, smuggling framings, bare line ends, oversize) never
// rewritten.
#include <gtest/gtest.h>

#include "core/SecretCipher.hpp"
#include "egress/SecretHeaders.hpp"

namespace airlock::egress {
namespace {
using Outcome = RewrittenHead::Outcome;

std::vector<InjectedSecret> secrets() {
    InjectedSecret api;
    api.name = "API_TOKEN";
    api.value = "real-api-value-123";
    api.placeholder = "airlock-secret-API_TOKEN-0123456789abcdef";
    api.hosts = {"api.example.com"};
    api.header = "Authorization";
    api.format = "Bearer {value}";
    InjectedSecret npm;
    npm.name = "NPM_TOKEN";
    npm.value = "real-npm-value-456";
    npm.placeholder = "airlock-secret-NPM_TOKEN-fedcba9876543210";
    npm.hosts = {"*.registry.example.org"};
    return {api, npm};
}

std::string head(const std::string& lines) { return lines + "\r\n"; }

TEST(SecretHeaders, TheHeaderIsSetForItsHostReplacingWhatTheGuestSent) {
    auto r = rewriteRequestHead(head("GET /v1/models?x=1 HTTP/1.1\r\nHost: api.example.com\r\n"
                                     "authorization: Bearer guest-guess\r\n"
                                     "Proxy-Authorization: Basic eDp5\r\nAccept: */*\r\n"
                                     "Accept-Encoding: gzip\r\n"),
                                "api.example.com", 443, secrets());
    ASSERT_EQ(r.outcome, Outcome::forward) << r.why;
    // Uncompressed, so that an echo of the value can be masked on its way back.
    EXPECT_EQ(r.head,
              "GET /v1/models?x=1 HTTP/1.1\r\nHost: api.example.com\r\nAccept: */*\r\n"
              "Authorization: Bearer real-api-value-123\r\nAccept-Encoding: identity\r\n\r\n");
    EXPECT_EQ(r.injected, std::vector<std::string>{"API_TOKEN"});
    EXPECT_EQ(r.method, "GET");
    EXPECT_EQ(r.path, "/v1/models");
}

TEST(SecretHeaders, APlaceholderIsReplacedInHeadersTargetAndBasicCredentials) {
    std::string placeholder = secrets()[1].placeholder;
    std::string basic = base64Encode("user:" + placeholder);
    auto r = rewriteRequestHead(head("GET /pkg?token=" + placeholder +
                                     " HTTP/1.1\r\nHost: npm.registry.example.org:443\r\n"
                                     "X-Token: " +
                                     placeholder + "\r\nAuthorization: Basic " + basic + "\r\n"),
                                "npm.registry.example.org", 443, secrets());
    ASSERT_EQ(r.outcome, Outcome::forward) << r.why;
    EXPECT_EQ(r.head.find(placeholder), std::string::npos) << r.head;
    EXPECT_NE(r.head.find("GET /pkg?token=real-npm-value-456 "), std::string::npos);
    EXPECT_NE(r.head.find("X-Token: real-npm-value-456\r\n"), std::string::npos);
    EXPECT_NE(r.head.find("Authorization: Basic " + base64Encode("user:real-npm-value-456")),
              std::string::npos);
    EXPECT_EQ(r.injected, std::vector<std::string>{"NPM_TOKEN"});
    // The apex is not under "*.registry.example.org".
    EXPECT_FALSE(secrets()[1].coversHost("registry.example.org"));
    EXPECT_TRUE(secrets()[1].coversHost("A.Registry.Example.Org."));
}

TEST(SecretHeaders, AnotherHostsPlaceholderOrValueIsBlockedAndNamed) {
    auto all = secrets();
    for (const std::string& carrier :
         {"GET /x?k=" + all[0].placeholder + " HTTP/1.1\r\nHost: evil.example\r\n",
          "GET / HTTP/1.1\r\nHost: evil.example\r\nX-Leak: pre" + all[0].placeholder + "post\r\n",
          "GET / HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Basic " +
              base64Encode("u:" + all[0].placeholder) + "\r\n",
          "GET / HTTP/1.1\r\nHost: evil.example\r\nCookie: v=" + all[0].value + "\r\n"}) {
        auto r = rewriteRequestHead(head(carrier), "evil.example", 443, all);
        EXPECT_EQ(r.outcome, Outcome::blocked) << carrier;
        EXPECT_EQ(r.secret, "API_TOKEN");
        EXPECT_EQ(r.why.find(all[0].value), std::string::npos) << "the reason never holds a value";
    }
    // NPM's placeholder to the API host is another secret's: blocked too.
    auto r = rewriteRequestHead(
        head("GET / HTTP/1.1\r\nHost: api.example.com\r\nX: " + all[1].placeholder + "\r\n"),
        "api.example.com", 443, all);
    EXPECT_EQ(r.outcome, Outcome::blocked);
    EXPECT_EQ(r.secret, "NPM_TOKEN");
    // Wherever it sits: a header's name, the method.
    for (const std::string& carrier :
         {"GET / HTTP/1.1\r\nHost: evil.example\r\n" + all[0].placeholder + ": x\r\n",
          all[0].placeholder + " / HTTP/1.1\r\nHost: evil.example\r\n"}) {
        auto named = rewriteRequestHead(head(carrier), "evil.example", 443, all);
        EXPECT_EQ(named.outcome, Outcome::blocked) << carrier;
    }
    auto own = rewriteRequestHead(
        head("GET / HTTP/1.1\r\nHost: api.example.com\r\n" + all[0].placeholder + ": x\r\n"),
        "api.example.com", 443, all);
    EXPECT_EQ(own.outcome, Outcome::blocked) << "a placeholder where no value can go";
    EXPECT_TRUE(own.head.empty());
    // A host no secret is for, with nothing of theirs: passes as it came (less the proxy's own).
    auto plain = rewriteRequestHead(head("GET / HTTP/1.1\r\nHost: other.example\r\n"),
                                    "other.example", 443, all);
    ASSERT_EQ(plain.outcome, Outcome::forward);
    EXPECT_EQ(plain.head, "GET / HTTP/1.1\r\nHost: other.example\r\n\r\n");
    EXPECT_TRUE(plain.injected.empty());
}

TEST(SecretHeaders, HostileHeadsAreMalformedNeverRewritten) {
    auto all = secrets();
    const std::string p = all[0].placeholder;
    for (const std::string& raw : std::vector<std::string>{
             // A placeholder split by a fold would slip past a scan of values.
             head("GET / HTTP/1.1\r\nHost: api.example.com\r\nX: " + p.substr(0, 10) + "\r\n " +
                  p.substr(10) + "\r\n"),
             head("GET / HTTP/1.1\r\nHost: api.example.com\r\nHost: evil.example\r\n"),
             head("GET / HTTP/1.1\r\nHost: evil.example\r\n"),
             head("GET / HTTP/1.1\r\nAccept: */*\r\n"),
             head("POST / HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 5\r\n"
                  "Transfer-Encoding: chunked\r\n"),
             head("POST / HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: gzip\r\n"),
             head("GET / HTTP/1.1\r\nHost: api.example.com\r\nX: a\nInjected: b\r\n"),
             head("GET / HTTP/1.1\r\nHost: api.example.com\r\nX: a\rb\r\n"),
             head("GET / HTTP/1.1\r\nHost : api.example.com\r\n"),
             head("GET / HTTP/2.0\r\nHost: api.example.com\r\n"),
             head("PRI * HTTP/2.0\r\n"),
             head("GET  / HTTP/1.1\r\nHost: api.example.com\r\n"),
             head("GET / HTTP/1.1\r\nHost: api.example.com\r\n: empty-name\r\n"),
             std::string("GET / HTTP/1.1\r\nHost: api.example.com\r\n"),  // no blank line
             head("GET / HTTP/1.1\r\nHost: api.example.com\r\nX: " + std::string(20000, 'a') +
                  "\r\n"),
         }) {
        auto r = rewriteRequestHead(raw, "api.example.com", 443, all);
        EXPECT_EQ(r.outcome, Outcome::malformed) << raw.substr(0, 120);
        EXPECT_TRUE(r.head.empty());
        EXPECT_TRUE(r.injected.empty());
    }
}

TEST(SecretHeaders, AValueWithALineBreakNeverEntersAHeader) {
    auto all = secrets();
    all[0].value = "x\r\nEvil: 1";
    auto r = rewriteRequestHead(head("GET / HTTP/1.1\r\nHost: api.example.com\r\n"),
                                "api.example.com", 443, all);
    EXPECT_EQ(r.outcome, Outcome::blocked);
    EXPECT_EQ(r.head.find("Evil"), std::string::npos);
}

TEST(SecretHeaders, HostsAreTheAllowlistsSyntaxPortsIncluded) {
    InjectedSecret s;
    s.hosts = {"api.example.com", "localhost:8443", "*.example.org:9000", "[::1]:7000", "10.0.0.1"};
    EXPECT_TRUE(s.coversHost("api.example.com", 443));
    EXPECT_TRUE(s.coversHost("API.example.com.", 80));
    EXPECT_FALSE(s.coversHost("api.example.com", 8443)) << "no port given: 443 and 80 only";
    EXPECT_TRUE(s.coversHost("localhost", 8443));
    EXPECT_FALSE(s.coversHost("localhost", 443));
    EXPECT_TRUE(s.coversHost("a.example.org", 9000));
    EXPECT_FALSE(s.coversHost("a.example.org", 443));
    EXPECT_TRUE(s.coversHost("::1", 7000));
    EXPECT_TRUE(s.coversHost("[::1]", 7000));
    EXPECT_TRUE(s.coversHost("10.0.0.1", 443));
    EXPECT_FALSE(s.coversHost("10.0.0.2", 443));
    EXPECT_EQ(HostPattern::parse("Host:99999").host, "");
    EXPECT_EQ(HostPattern::parse("host:0").host, "");
    EXPECT_EQ(HostPattern::parse("host:x").host, "");
    EXPECT_EQ(HostPattern::parse("[::1").host, "");
    EXPECT_EQ(HostPattern::parse("2001:db8::1").host, "2001:db8::1");
    EXPECT_EQ(HostPattern::parse("2001:db8::1").port, 0u);
}

}  // namespace
}  // namespace airlock::egress

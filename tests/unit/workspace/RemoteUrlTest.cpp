#include <gtest/gtest.h>

#include "core/Error.hpp"
#include "support/TestEnv.hpp"
#include "workspace/RemoteUrl.hpp"

namespace airlock::workspace {
namespace {

using test::codeOf;

TEST(RemoteUrl, ParsesTheSchemesItSupports) {
    auto u = RemoteUrl::parse("https://git.example.com/owner/repo.git");
    EXPECT_EQ(u.scheme, "https");
    EXPECT_EQ(u.host, "git.example.com");
    EXPECT_EQ(u.port, 443u);
    EXPECT_EQ(u.credentialHost(), "git.example.com");
    auto p = RemoteUrl::parse("http://127.0.0.1:8417/demo.git");
    EXPECT_EQ(p.credentialHost(), "127.0.0.1:8417");
    auto s = RemoteUrl::parse("git@git.example.com:owner/repo.git");
    EXPECT_EQ(s.scheme, "ssh");
    EXPECT_EQ(s.user, "git");
    EXPECT_EQ(s.credentialHost(), "git.example.com");
    auto v6 = RemoteUrl::parse("https://[::1]:8443/r.git");
    EXPECT_EQ(v6.host, "::1");
    EXPECT_EQ(v6.credentialHost(), "[::1]:8443");
}

TEST(RemoteUrl, RefusesSecretsAndOddInput) {
    for (const char* bad :
         {"https://user:pw@host/r.git", "https://token@host/r.git", "ftp://host/r", "file:///etc",
          "/local/path", "https://host:99999/r", "https://ho st/r", "https://host/r\n.git", ""})
        EXPECT_EQ(codeOf([&] { RemoteUrl::parse(bad); }), ErrorCode::bad_request) << bad;
}

TEST(RemoteUrl, SameOriginMeansSchemeHostAndPort) {
    auto a = RemoteUrl::parse("http://127.0.0.1:8000/a.git");
    EXPECT_TRUE(a.sameOrigin(RemoteUrl::parse("http://127.0.0.1:8000/other/b.git")));
    EXPECT_FALSE(a.sameOrigin(RemoteUrl::parse("http://127.0.0.1:8001/a.git")));
    EXPECT_FALSE(a.sameOrigin(RemoteUrl::parse("https://127.0.0.1:8000/a.git")));
    EXPECT_FALSE(a.sameOrigin(RemoteUrl::parse("http://localhost:8000/a.git")));
}

TEST(RemoteUrl, ResolvesSubmoduleUrlsAsGitDoes) {
    auto super = RemoteUrl::parse("http://h:81/group/demo.git");
    EXPECT_EQ(super.resolve("../lib.git").text, "http://h:81/group/lib.git");
    EXPECT_EQ(super.resolve("../../lib.git").text, "http://h:81/lib.git");
    EXPECT_EQ(super.resolve("./sub.git").text, "http://h:81/group/demo.git/sub.git");
    EXPECT_EQ(super.resolve("https://other/x.git").text, "https://other/x.git");
    EXPECT_EQ(codeOf([&] { super.resolve("../../../x.git"); }), ErrorCode::unprocessable);
}

TEST(RemoteUrl, ACredentialsDefaultScopeIsTheRepositorysDirectory) {
    EXPECT_EQ(RemoteUrl::parse("https://h/org/app.git").scopeDirectory(), "/org/");
    EXPECT_EQ(RemoteUrl::parse("https://h/group/sub/app.git").scopeDirectory(), "/group/sub/");
    EXPECT_EQ(RemoteUrl::parse("http://h:81/demo.git").scopeDirectory(), "/");
    // A path a server might read otherwise has no scope at all.
    EXPECT_EQ(RemoteUrl::parse("https://h/org/../app.git").scopeDirectory(), "");
    EXPECT_EQ(RemoteUrl::parse("https://h/org/%2e%2e/app.git").scopeDirectory(), "");
}

TEST(RemoteUrl, InternalAddressesAreRefusedUnlessTheOperatorOpensThem) {
    egress::AddressPolicy closed;
    EXPECT_EQ(
        codeOf([&] { requireAllowedAddress(RemoteUrl::parse("http://127.0.0.1/x.git"), closed); }),
        ErrorCode::forbidden);
    EXPECT_EQ(codeOf([&] {
                  requireAllowedAddress(RemoteUrl::parse("http://169.254.169.254/x.git"), closed);
              }),
              ErrorCode::forbidden);
    EXPECT_EQ(
        codeOf([&] { requireAllowedAddress(RemoteUrl::parse("http://10.1.2.3/x.git"), closed); }),
        ErrorCode::forbidden);
    egress::AddressPolicy opened({egress::CidrRange::parse("127.0.0.1/32")});
    EXPECT_NO_THROW(requireAllowedAddress(RemoteUrl::parse("http://127.0.0.1:9/x.git"), opened));
    EXPECT_EQ(codeOf([&] {
                  requireAllowedAddress(RemoteUrl::parse("http://169.254.169.254/x.git"), opened);
              }),
              ErrorCode::forbidden);
}

}  // namespace
}  // namespace airlock::workspace

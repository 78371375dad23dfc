// An operator's private registry token: added by the host's package proxy
// to its own upstream's requests, never to another origin's.
#include <gtest/gtest.h>

#include <boost/asio/ssl/context.hpp>
#include <fstream>

#include "core/Error.hpp"
#include "packages/PackageService.hpp"
#include "packages/UpstreamClient.hpp"
#include "support/HttpsClient.hpp"
#include "support/TestEnv.hpp"
#include "support/TlsTestServer.hpp"

namespace airlock::packages {
namespace {

TEST(UpstreamClient, TheTokenGoesToItsRegistryAndNotWhereARedirectLeads) {
    test::TempDir dir;
    ASSERT_TRUE(test::makeTestCertificates(dir.path()));
    test::TlsTestServer cdn(dir.path() + "/server.pem", dir.path() + "/server.key",
                            [](const std::string&) -> std::pair<std::string, std::string> {
                                return {"200 OK", "tarball-bytes"};
                            });
    std::string cdnUrl = "https://127.0.0.1:" + std::to_string(cdn.port()) + "/file";
    // The status line carries the redirect's Location (the server writes no
    // headers of its own choosing).
    test::TlsTestServer registry(
        dir.path() + "/server.pem", dir.path() + "/server.key",
        [cdnUrl](const std::string& head) -> std::pair<std::string, std::string> {
            if (head.rfind("GET /tarball", 0) == 0) return {"302 Found\r\nLocation: " + cdnUrl, ""};
            return {"200 OK", "{}"};
        });
    std::string registryUrl = "https://127.0.0.1:" + std::to_string(registry.port());
    auto tls = std::make_shared<boost::asio::ssl::context>(
        test::clientContext({dir.path() + "/ca.pem", 0}));
    UpstreamClient client(
        tls, [](const HttpUrl&, const boost::asio::ip::address&) { return std::string(); });
    client.setAuthorization({{HttpUrl::parse(registryUrl)->origin(), "Bearer reg-Token-0001"}});

    std::string body;
    auto meta = client.get(registryUrl + "/meta", {}, 1 << 20,
                           [&](std::string_view piece) { body.append(piece); });
    EXPECT_EQ(meta.status, 200);
    body.clear();
    auto tarball = client.get(registryUrl + "/tarball", {}, 1 << 20,
                              [&](std::string_view piece) { body.append(piece); });
    EXPECT_EQ(tarball.status, 200);
    EXPECT_EQ(body, "tarball-bytes");

    auto heads = registry.heads();
    ASSERT_EQ(heads.size(), 2u);
    for (const auto& head : heads)
        EXPECT_NE(head.find("Authorization: Bearer reg-Token-0001\r\n"), std::string::npos) << head;
    ASSERT_EQ(cdn.heads().size(), 1u);
    EXPECT_EQ(cdn.heads()[0].find("reg-Token"), std::string::npos) << "another origin";
    EXPECT_EQ(cdn.heads()[0].find("Authorization"), std::string::npos);
}

TEST(PackageUpstreams, AuthorizationFilesNameAConfiguredUpstreamAndHoldOneLine) {
    test::TempDir dir;
    auto write = [&](const std::string& name, const std::string& text) {
        std::ofstream(dir.path() + "/" + name) << text;
        return dir.path() + "/" + name;
    };
    auto upstreams = PackageUpstreams::parse({"npm=https://npm.internal:8443/",
                                              "apt=https://apt.internal/debian",
                                              "apt=https://mirror.internal/ubuntu"});
    auto token = write("npm", "Bearer npm-Token-0002\n");
    auto auth = upstreams.authorization({"npm=" + token, "apt=" + write("apt", "Basic YTpi\n")});
    EXPECT_EQ(auth.at(upstreams.npm->origin()), "Bearer npm-Token-0002");
    EXPECT_EQ(auth.at(upstreams.apt[0].second.origin()), "Basic YTpi");
    EXPECT_EQ(auth.at(upstreams.apt[1].second.origin()), "Basic YTpi");
    EXPECT_EQ(auth.size(), 3u);

    auto clear = PackageUpstreams::parse({"pypi=http://pypi.internal/simple/"});
    EXPECT_THROW(clear.authorization({"pypi=" + token}), Error)
        << "a token never crosses the network in clear";
    for (const auto& bad : std::vector<std::string>{
             "pypi=" + token,                                  // no pypi upstream
             "npm=" + dir.path() + "/missing",                 // unreadable
             "npm=" + write("two", "Bearer a\nX-Other: b\n"),  // a second line is no header
             "npm=" + write("empty", "\n"), "cargo=" + token, "npm"}) {
        try {
            upstreams.authorization({bad});
            ADD_FAILURE() << bad << " was taken";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::bad_request) << bad;
            EXPECT_EQ(std::string(e.what()).find("npm-Token"), std::string::npos) << e.what();
        }
    }
}

}  // namespace
}  // namespace airlock::packages

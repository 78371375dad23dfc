// The console's sessions through the one route table: a key exchanged for a
// cookie that authenticates on its own, cross-site changes refused (Origin
// and the session's token), sign-out and key revocation ending it, and the
// console's page served under its policy with a fresh nonce.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../controller/ControllerFixture.hpp"
#include "api/EventStreamSession.hpp"
#include "api/Router.hpp"
#include "api/WebSessions.hpp"
#include "store/ApiKeyStore.hpp"
#include "support/TestEnv.hpp"

namespace airlock::api {
namespace {
using nlohmann::json;

constexpr const char* kHost = "127.0.0.1:8080";
constexpr const char* kOrigin = "http://127.0.0.1:8080";

class RouterSessionsTest : public test::ControllerFixture {
  protected:
    RouterSessionsTest()
        : keys(*db), auth(keys), router(controller->frontDoorServices(), auth, keys, "test") {
        approverKey = keys.create("t1", Role::approver, "alice");
        agentKey = keys.create("t1", Role::agent, "bot");
    }
    ApiResponse call(const std::string& method, const std::string& path,
                     std::map<std::string, std::string> headers, const std::string& body = {}) {
        ApiRequest r;
        r.method = method;
        r.path = path;
        r.body = body;
        r.host = kHost;
        r.contentType = "application/json";
        if (headers.count("authorization")) r.authorization = headers["authorization"];
        r.headers = std::move(headers);
        return router.handle(r);
    }
    // Signs in; the cookie header and the session's token.
    std::pair<std::string, std::string> signIn(const std::string& key) {
        auto r = call("POST", "/v1/sessions", {{"origin", kOrigin}},
                      json{{"key", key}}.dump());
        EXPECT_EQ(r.status, 201) << r.body;
        std::string cookie = r.headers["Set-Cookie"];
        return {cookie.substr(0, cookie.find(';')), json::parse(r.body).value("csrf_token", "")};
    }
    ApiKeyStore keys;
    Authenticator auth;
    Router router;
    ApiKeys::Created approverKey, agentKey;
};

TEST_F(RouterSessionsTest, AKeyBecomesAnHttpOnlyStrictCookieThatAuthenticatesOnItsOwn) {
    auto r = call("POST", "/v1/sessions", {}, json{{"key", approverKey.key}}.dump());
    ASSERT_EQ(r.status, 201) << r.body;
    std::string setCookie = r.headers["Set-Cookie"];
    EXPECT_EQ(setCookie.rfind(std::string(WebSessions::kCookie) + "=", 0), 0u) << setCookie;
    EXPECT_NE(setCookie.find("; HttpOnly"), std::string::npos);
    EXPECT_NE(setCookie.find("; SameSite=Strict"), std::string::npos);
    EXPECT_NE(setCookie.find("; Max-Age="), std::string::npos) << "it expires";
    EXPECT_EQ(setCookie.find("Secure"), std::string::npos) << "not under plain HTTP";
    auto body = json::parse(r.body);
    EXPECT_EQ(body["role"], "approver");
    EXPECT_EQ(body["tenant"], "t1");
    EXPECT_EQ(body["key_id"], approverKey.record.id);
    EXPECT_EQ(r.body.find(approverKey.key), std::string::npos) << "the key is never echoed";

    std::string cookie = setCookie.substr(0, setCookie.find(';'));
    EXPECT_EQ(call("GET", "/v1/approvals", {{"cookie", cookie}}).status, 200);
    EXPECT_EQ(call("GET", "/v1/approvals", {}).status, 401);
    auto current = call("GET", "/v1/sessions/current", {{"cookie", "a=b; " + cookie + "; c=d"}});
    EXPECT_EQ(current.status, 200) << current.body;
    EXPECT_EQ(json::parse(current.body)["csrf_token"], body["csrf_token"]);
    EXPECT_EQ(call("GET", "/v1/sessions/current",
                   {{"authorization", "Bearer " + approverKey.key}})
                  .status,
              404)
        << "a key is not a session";

    EXPECT_EQ(call("POST", "/v1/sessions", {}, json{{"key", "ak_nope"}}.dump()).status, 401);
    EXPECT_EQ(call("POST", "/v1/sessions", {}, R"({"key":"x","user":"y"})").status, 400);
    EXPECT_EQ(call("POST", "/v1/sessions", {{"origin", "http://evil.example"}},
                   json{{"key", approverKey.key}}.dump())
                  .status,
              403)
        << "no one signs a browser in from another site";
    EXPECT_EQ(call("GET", "/v1/approvals", {{"cookie", "airlock_session=forged"}}).status, 401);
}

TEST_F(RouterSessionsTest, AChangeMadeWithTheCookieNeedsThisOriginAndTheSessionsToken) {
    auto [cookie, csrf] = signIn(approverKey.key);
    auto decide = [&](std::map<std::string, std::string> headers) {
        headers["cookie"] = cookie;
        return call("POST", "/v1/approvals/apr-none", headers,
                    R"({"decision":"approve","reason":"r"})")
            .status;
    };
    EXPECT_EQ(decide({}), 403) << "no Origin";
    EXPECT_EQ(decide({{"origin", "http://evil.example"}}), 403);
    EXPECT_EQ(decide({{"origin", "http://evil.example"}, {"x-csrf-token", csrf}}), 403);
    EXPECT_EQ(decide({{"origin", kOrigin}}), 403) << "no token";
    EXPECT_EQ(decide({{"origin", kOrigin}, {"x-csrf-token", csrf + "x"}}), 403);
    EXPECT_EQ(decide({{"origin", kOrigin}, {"x-csrf-token", csrf}}), 404)
        << "past the checks: the approval does not exist";
    EXPECT_EQ(call("GET", "/v1/approvals", {{"cookie", cookie}, {"origin", "http://evil.example"}})
                  .status,
              403)
        << "a read from another origin (a WebSocket's) is refused too";

    auto [agentCookie, agentCsrf] = signIn(agentKey.key);
    EXPECT_EQ(call("POST", "/v1/approvals/apr-none",
                   {{"cookie", agentCookie}, {"origin", kOrigin}, {"x-csrf-token", agentCsrf}},
                   R"({"decision":"approve","reason":"r"})")
                  .status,
              403)
        << "the session has its key's role";
}

TEST_F(RouterSessionsTest, SigningOutOrRevokingTheKeyEndsTheSession) {
    auto [cookie, csrf] = signIn(approverKey.key);
    EXPECT_EQ(call("DELETE", "/v1/sessions/current", {{"cookie", cookie}}).status, 403)
        << "signing out is a change too";
    auto out = call("DELETE", "/v1/sessions/current",
                    {{"cookie", cookie}, {"origin", kOrigin}, {"x-csrf-token", csrf}});
    EXPECT_EQ(out.status, 204);
    EXPECT_NE(out.headers["Set-Cookie"].find("Max-Age=0"), std::string::npos);
    EXPECT_EQ(call("GET", "/v1/approvals", {{"cookie", cookie}}).status, 401);

    auto second = signIn(approverKey.key).first;
    EXPECT_EQ(call("GET", "/v1/approvals", {{"cookie", second}}).status, 200);
    ASSERT_TRUE(keys.remove(approverKey.record.id));
    EXPECT_EQ(call("GET", "/v1/approvals", {{"cookie", second}}).status, 401);
    EXPECT_EQ(router.sessions().size(), 0u) << "the revoked key's session is gone";
}

TEST_F(RouterSessionsTest, SessionsAreBoundedPerKey) {
    WebSessions sessions;
    std::string first = sessions.create("key-a").first;
    for (std::size_t i = 1; i < WebSessions::kMaxPerKey; ++i) sessions.create("key-a");
    EXPECT_TRUE(sessions.find(first));
    sessions.create("key-a");
    EXPECT_FALSE(sessions.find(first)) << "the oldest went";
    EXPECT_EQ(sessions.size(), WebSessions::kMaxPerKey);
    EXPECT_EQ(WebSessions::cookieValue("x=1; airlock_session=abc ;y=2", "airlock_session"), "abc");
    EXPECT_EQ(WebSessions::cookieValue("xairlock_session=abc", "airlock_session"), "");
}

TEST_F(RouterSessionsTest, TheConsoleIsServedUnderAStrictPolicyWithAFreshNonce) {
    test::TempDir dir;
    std::ofstream(dir.path() + "/index.html")
        << R"(<meta name="csp-nonce" content="__CSP_NONCE__"><script src="/console/app.js"></script>)";
    std::ofstream(dir.path() + "/app.js") << "console.log(1)";
    std::ofstream(dir.path() + "/secret.key") << "not served";
    std::filesystem::create_symlink("/etc/passwd", dir.path() + "/passwd.txt");
    router.setConsole(dir.path(), false);
    auto page = call("GET", "/console/", {});
    ASSERT_EQ(page.status, 200) << page.body;
    EXPECT_EQ(page.contentType, "text/html; charset=utf-8");
    std::string csp = page.headers["Content-Security-Policy"];
    EXPECT_NE(csp.find("script-src 'self';"), std::string::npos) << csp;
    EXPECT_EQ(csp.find("unsafe"), std::string::npos) << csp;
    auto nonceAt = csp.find("'nonce-");
    ASSERT_NE(nonceAt, std::string::npos);
    std::string nonce = csp.substr(nonceAt + 7, csp.find('\'', nonceAt + 7) - nonceAt - 7);
    EXPECT_NE(page.body.find("content=\"" + nonce + "\""), std::string::npos) << page.body;
    EXPECT_NE(call("GET", "/console/", {}).headers["Content-Security-Policy"], csp)
        << "a nonce per answer";
    EXPECT_EQ(call("GET", "/console/app.js", {}).body, "console.log(1)");
    EXPECT_EQ(call("GET", "/console", {}).status, 308);
    for (const char* path : {"/console/secret.key", "/console/passwd.txt", "/console/../x",
                             "/console/missing.js"})
        EXPECT_EQ(call("GET", path, {}).status, 404) << path;
}

TEST(EventStreamRender, AnEventIsOneLineOfDataNamedByItsType) {
    AuditEvent e{42, "sbx-a", "t1", "2026-12-06T00:00:00Z", "exec.executed",
                 R"({"cmd":"echo\nid: 99\n\nevent: forged","exit_code":0})"};
    std::string text = EventStreamSession::render(e);
    EXPECT_EQ(text.rfind("id: 42\nevent: exec.executed\ndata: {", 0), 0u) << text;
    EXPECT_EQ(text.find("\n\n"), text.size() - 2) << "the guest's newlines stay inside the data";
    auto data = json::parse(text.substr(text.find("data: ") + 6));
    EXPECT_EQ(data["sandbox"], "sbx-a");
    EXPECT_EQ(data["tenant"], "t1");
    EXPECT_EQ(data["data"]["exit_code"], 0);
    e.type = "x\ny";
    EXPECT_NE(EventStreamSession::render(e).find("event: xy\n"), std::string::npos);
}

}  // namespace
}  // namespace airlock::api

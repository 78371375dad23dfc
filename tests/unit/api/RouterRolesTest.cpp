// Keys and roles through the one route table: every route is walked with no
// key, a revoked key, an expired key, each role and another tenant's key.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "../controller/ControllerFixture.hpp"
#include "api/Router.hpp"
#include "core/Clock.hpp"
#include "core/Sha256.hpp"
#include "store/ApiKeyStore.hpp"

namespace airlock::api {
namespace {
using nlohmann::json;

class RouterRolesTest : public test::ControllerFixture {
  protected:
    RouterRolesTest() : keys(*db), auth(keys), router(controller->frontDoorServices(), auth, keys, "test") {
        agent = keys.create("t1", Role::agent, "bot-a").key;
        approver = keys.create("t1", Role::approver, "alice").key;
        admin = keys.create("ops", Role::admin, "root").key;
        otherAgent = keys.create("t2", Role::agent, "bot-b").key;
        otherApprover = keys.create("t2", Role::approver, "bob").key;
    }
    ApiResponse call(const std::string& method, const std::string& path, const std::string& key,
                     const std::string& body = {}) {
        ApiRequest r;
        r.method = method;
        r.path = path.substr(0, path.find('?'));
        r.body = body;
        if (auto q = path.find('?'); q != std::string::npos) {  // one k=v is all these tests use
            auto kv = path.substr(q + 1);
            r.query[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
        }
        if (!key.empty()) r.authorization = "Bearer " + key;
        return router.handle(r);
    }
    std::string roleKey(Role role) {
        return role == Role::agent ? agent : role == Role::approver ? approver : admin;
    }
    ApiKeyStore keys;
    Authenticator auth;
    Router router;
    std::string agent, approver, admin, otherAgent, otherApprover;
};

std::string code(const ApiResponse& r) { return json::parse(r.body)["error"]["code"]; }

// A concrete path for a route pattern: {} segments become the ids given.
std::string concrete(const std::string& pattern, const std::vector<std::string>& ids) {
    std::string out;
    std::size_t next = 0, i = 0;
    while (i < pattern.size()) {
        if (pattern.compare(i, 2, "{}") == 0) {
            out += next < ids.size() ? ids[next] : "x";
            ++next;
            i += 2;
        } else {
            out += pattern[i++];
        }
    }
    return out;
}

TEST_F(RouterRolesTest, EveryRouteAnswersByRoleAndTenant) {
    auto created = call("POST", "/v1/sandboxes", agent, R"({"template":"minimal"})");
    ASSERT_EQ(created.status, 201) << created.body;
    std::string sbx = json::parse(created.body)["id"];
    auto revoked = keys.create("t1", Role::admin, "gone");
    ASSERT_TRUE(keys.remove(revoked.record.id));
    auto expiring = keys.create("t1", Role::admin, "soon", nowUnixSeconds() + 1);
    // Past its expiry by the second it names.
    ASSERT_TRUE(test::waitFor([&] { return !keys.findValid(expiring.key, nowUnixSeconds()); },
                              std::chrono::seconds(5)));

    std::size_t walked = 0;
    for (const auto& route : router.routeTable()) {
        if (route.stream || route.roles == Router::kPublic) continue;
        // DELETE routes last would destroy what later routes need: they are
        // walked without a key that may use them, and the allowed case is
        // the one with no {} to remove.
        std::string path = concrete(route.pattern, {sbx, "ex-none", "9"});
        std::string what = route.method + " " + route.pattern;
        ++walked;
        EXPECT_EQ(call(route.method, path, "").status, 401) << what << ": no key";
        EXPECT_EQ(call(route.method, path, revoked.key).status, 401) << what << ": revoked key";
        EXPECT_EQ(call(route.method, path, expiring.key).status, 401) << what << ": expired key";
        for (Role role : {Role::agent, Role::approver, Role::admin}) {
            bool allowed = route.roles & (1u << static_cast<unsigned>(role));
            if (allowed && route.method == "DELETE")
                continue;  // keep the sandbox for the next routes
            auto r = call(route.method, path, roleKey(role));
            if (allowed) {
                EXPECT_NE(r.status, 401) << what << " as " << roleName(role);
                EXPECT_NE(r.status, 403) << what << " as " << roleName(role) << ": " << r.body;
            } else {
                EXPECT_EQ(r.status, 403) << what << " as " << roleName(role) << ": " << r.body;
                EXPECT_EQ(code(r), "forbidden");
            }
        }
        // Another tenant's key that may use the route never reaches t1's sandbox.
        if (route.pattern.find("/v1/sandboxes/{}") == 0 && (route.roles & Router::kAgent)) {
            auto r = call(route.method, path, otherAgent);
            EXPECT_TRUE(r.status == 404 || r.status == 400)
                << what << " by another tenant: " << r.status;
        }
    }
    EXPECT_GT(walked, 30u) << "the walk covers the table";
    // The stream routes state their roles in the same table.
    std::size_t streams = 0;
    for (const auto& route : router.routeTable())
        if (route.stream && route.roles != Router::kPublic) {
            ++streams;
            // A build's log and the live events are for anyone of the tenant to
            // read, and the terminal for a human of any role to step into; the
            // rest drive sandboxes.
            bool anyRole = route.pattern.rfind("/v1/templates/", 0) == 0 ||
                           route.pattern == "/v1/events" ||
                           route.pattern == "/v1/sandboxes/{}/exec/ws";
            EXPECT_EQ(route.roles, anyRole ? Router::kAnyRole : Router::kDrivers)
                << route.method << " " << route.pattern;
        }
    EXPECT_EQ(streams, 8u);
}

TEST_F(RouterRolesTest, TheAgentCannotApproveItsOwnCommandItsApproverCan) {
    auto created = call("POST", "/v1/sandboxes", agent,
                        R"({"template":"minimal","policy":{"approve":["touch *"]}})");
    ASSERT_EQ(created.status, 201) << created.body;
    std::string sbx = json::parse(created.body)["id"];
    auto gated = call("POST", "/v1/sandboxes/" + sbx + "/exec", agent,
                      R"({"shell":"touch /tmp/x; echo done"})");
    ASSERT_EQ(gated.status, 202) << gated.body;
    std::string approval = json::parse(gated.body)["approval_id"];

    auto self = call("POST", "/v1/approvals/" + approval, agent,
                     R"({"decision":"approve","reason":"self"})");
    EXPECT_EQ(self.status, 403) << "the agent is not its own reviewer";
    EXPECT_EQ(call("GET", "/v1/approvals", agent).status, 403);
    EXPECT_EQ(call("POST", "/v1/approvals/" + approval, otherApprover, R"({"decision":"approve"})")
                  .status,
              404)
        << "another tenant's approver never sees it";
    auto listed = call("GET", "/v1/approvals", approver);
    ASSERT_EQ(listed.status, 200);
    EXPECT_EQ(json::parse(listed.body)["approvals"].size(), 1u);
    EXPECT_EQ(call("POST", "/v1/sandboxes/" + sbx + "/exec", approver, R"({"shell":"id"})").status,
              403)
        << "an approver runs nothing";
    auto decided = call("POST", "/v1/approvals/" + approval, approver,
                        R"({"decision":"approve","reason":"ok"})");
    ASSERT_EQ(decided.status, 200) << decided.body;
    auto audit = call("GET", "/v1/sandboxes/" + sbx + "/audit", agent);
    ASSERT_EQ(audit.status, 200);
    EXPECT_NE(audit.body.find("alice"), std::string::npos) << "the audit names the deciding key";
    EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + sbx, agent).status, 204);
}

// Attack 11: GET /v1/approvals and GET /v1/approvals/{id} show what decides
// the run (secrets masked everywhere in the body), to the approval's tenant
// alone, and a decision that names another digest decides nothing.
TEST_F(RouterRolesTest, ApprovalsShowTheWholeRequestToTheirTenantAlone) {
    const std::string token = "tok-Approv-98765-4321";
    auto created = call("POST", "/v1/sandboxes", agent,
                        json{{"template", "minimal"},
                             {"policy", {{"approve", {"make *"}}}},
                             {"secrets", {{"DEPLOY_TOKEN", token}}}}
                            .dump());
    ASSERT_EQ(created.status, 201) << created.body;
    std::string sbx = json::parse(created.body)["id"];
    auto gated = call("POST", "/v1/sandboxes/" + sbx + "/exec", agent,
                      json{{"shell", "make deploy TOKEN=" + token + " TARGET=prod"},
                           {"cwd", "/tmp"},
                           {"env", {{"LD_PRELOAD", "/tmp/x.so"}, {"COPY", token}}},
                           {"stdin", "deploy input"},
                           {"timeout_s", 120}}
                          .dump());
    ASSERT_EQ(gated.status, 202) << gated.body;
    std::string approval = json::parse(gated.body)["approval_id"];
    auto listed = call("GET", "/v1/approvals", approver);
    ASSERT_EQ(listed.status, 200);
    EXPECT_EQ(listed.body.find(token), std::string::npos) << listed.body;
    auto item = json::parse(listed.body)["approvals"][0];
    EXPECT_EQ(item["id"], approval);
    EXPECT_EQ(item["command"], "make deploy TOKEN=*** TARGET=prod");
    EXPECT_EQ(item["cwd"], "/tmp");
    EXPECT_EQ(item["user"], "user");
    EXPECT_EQ(item["env"], json::parse(R"([{"name":"COPY","value":"***"},
                                           {"name":"LD_PRELOAD","value":"/tmp/x.so"}])"));
    EXPECT_EQ(item["stdin"]["sha256"], sha256Hex("deploy input"));
    EXPECT_EQ(item["timeout_s"], 120);
    EXPECT_EQ(item["state"], "pending");
    EXPECT_EQ(item["kind"], "exec");
    EXPECT_EQ(item["secrets"], json::array({"DEPLOY_TOKEN"}));
    EXPECT_NE(item["policy"]["reason"].get<std::string>().find("make *"), std::string::npos)
        << item["policy"].dump();
    auto one = call("GET", "/v1/approvals/" + approval, approver);
    ASSERT_EQ(one.status, 200) << one.body;
    EXPECT_EQ(one.body.find(token), std::string::npos);
    EXPECT_EQ(json::parse(one.body)["request_digest"], item["request_digest"]);
    EXPECT_EQ(call("GET", "/v1/approvals/" + approval, otherApprover).status, 404);
    EXPECT_EQ(call("GET", "/v1/approvals/" + approval, agent).status, 403);
    EXPECT_EQ(call("GET", "/v1/approvals/" + approval, admin).status, 200);
    EXPECT_EQ(call("GET", "/v1/approvals/" + approval + "/patch", approver).status, 404)
        << "a command has no patch";
    auto wrong = call("POST", "/v1/approvals/" + approval, approver,
                      json{{"decision", "approve"}, {"request_digest", std::string(64, 'f')}}.dump());
    EXPECT_EQ(wrong.status, 409) << wrong.body;
    EXPECT_EQ(json::parse(call("GET", "/v1/approvals/" + approval, approver).body)["state"],
              "pending");
    auto denied = call("POST", "/v1/approvals/" + approval, approver,
                       json{{"decision", "deny"}, {"request_digest", item["request_digest"]}}.dump());
    EXPECT_EQ(denied.status, 200) << denied.body;
    EXPECT_EQ(json::parse(call("GET", "/v1/approvals/" + approval, approver).body)["state"],
              "denied");
    EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + sbx, agent).status, 204);
}

TEST_F(RouterRolesTest, AdminsSeeEveryTenantAndManageKeys) {
    auto a = call("POST", "/v1/sandboxes", agent, R"({"template":"minimal"})");
    auto b = call("POST", "/v1/sandboxes", otherAgent, R"({"template":"minimal"})");
    ASSERT_EQ(a.status, 201);
    ASSERT_EQ(b.status, 201);
    std::string sa = json::parse(a.body)["id"], sb = json::parse(b.body)["id"];
    auto all = json::parse(call("GET", "/v1/sandboxes", admin).body)["sandboxes"];
    ASSERT_EQ(all.size(), 2u) << "an admin lists every tenant's";
    for (const auto& s : all) EXPECT_EQ(s["tenant"], s["id"] == sa ? "t1" : "t2");
    EXPECT_FALSE(
        json::parse(call("GET", "/v1/sandboxes", agent).body)["sandboxes"][0].contains("tenant"));
    EXPECT_EQ(call("GET", "/v1/sandboxes/" + sb, admin).status, 200);
    EXPECT_EQ(call("GET", "/v1/sandboxes/" + sb, agent).status, 404);

    // Keys: minted with a role, listed without secrets, revoked at once.
    auto minted =
        call("POST", "/v1/keys", admin, R"({"tenant":"t3","role":"agent","name":"ci-bot"})");
    ASSERT_EQ(minted.status, 201) << minted.body;
    auto key = json::parse(minted.body);
    EXPECT_EQ(key["role"], "agent");
    EXPECT_EQ(key["tenant"], "t3");
    EXPECT_TRUE(key["expires_at"].is_null());
    std::string secret = key["key"];
    EXPECT_EQ(call("GET", "/v1/sandboxes", secret).status, 200);
    auto listing = call("GET", "/v1/keys", admin);
    ASSERT_EQ(listing.status, 200);
    EXPECT_EQ(listing.body.find(secret), std::string::npos) << "no secret in a listing";
    EXPECT_EQ(json::parse(call("GET", "/v1/keys?tenant=t3", admin).body)["keys"].size(), 1u);
    EXPECT_EQ(
        call("POST", "/v1/keys", agent, R"({"tenant":"t1","role":"admin","name":"up"})").status,
        403);
    EXPECT_EQ(call("DELETE", "/v1/keys/" + key["id"].get<std::string>(), admin).status, 204);
    EXPECT_EQ(call("GET", "/v1/sandboxes", secret).status, 401) << "revoked at once";
    EXPECT_EQ(call("DELETE", "/v1/keys/" + key["id"].get<std::string>(), admin).status, 404);

    for (const char* bad :
         {R"({"tenant":"T!","role":"agent","name":"x"})",
          R"({"tenant":"t","role":"root","name":"x"})", R"({"tenant":"t","role":"agent"})",
          R"({"tenant":"t","role":"agent","name":"x","extra":1})",
          R"({"tenant":"t","role":"agent","name":"x","expires_at":"2001-01-01T00:00:00Z"})",
          R"({"tenant":"t","role":"agent","name":"x","expires_at":"tomorrow"})"})
        EXPECT_EQ(call("POST", "/v1/keys", admin, bad).status, 400) << bad;
    auto timed = call(
        "POST", "/v1/keys", admin,
        R"({"tenant":"t1","role":"approver","name":"tmp","expires_at":"2099-01-01T00:00:00Z"})");
    ASSERT_EQ(timed.status, 201);
    EXPECT_EQ(json::parse(timed.body)["expires_at"], "2099-01-01T00:00:00.000Z");

    // The last admin key cannot be revoked: nobody could mint keys again.
    std::string adminId;
    for (const auto& k : keys.list(std::nullopt))
        if (k.role == Role::admin) adminId = k.id;
    EXPECT_EQ(call("DELETE", "/v1/keys/" + adminId, admin).status, 409);
    EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + sb, admin).status, 204)
        << "an admin manages any tenant's";
    EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + sa, agent).status, 204);
}

TEST(ClockTest, ParsesRfc3339AndRejectsTheRest) {
    EXPECT_EQ(parseTimestamp("1970-01-01T00:00:00Z"), 0);
    EXPECT_EQ(parseTimestamp("2026-12-01T10:00:00.123Z"), 1796119200);
    EXPECT_EQ(parseTimestamp("2026-12-01T12:00:00+02:00"), 1796119200);
    EXPECT_EQ(parseTimestamp("2026-12-01T08:30:00-01:30"), 1796119200);
    for (const char* bad :
         {"", "2026-12-01", "2026-12-01T10:00:00", "2026-13-01T10:00:00Z", "2026-02-31T10:00:00Z",
          "2026-12-01T10:00:00Zjunk", "2026-12-01 10:00:00Z", "tomorrow"})
        EXPECT_FALSE(parseTimestamp(bad)) << bad;
}

}  // namespace
}  // namespace airlock::api

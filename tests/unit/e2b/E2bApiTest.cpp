#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "../api/FrontDoorsFixture.hpp"
#include "api/E2bApi.hpp"
#include "api/E2bEnvd.hpp"
#include "e2b/E2bWatchers.hpp"
#include <boost/asio/thread_pool.hpp>
#include "api/Router.hpp"
#include "core/Clock.hpp"
#include "egress/EgressGateway.hpp"
#include "packages/PackageGateway.hpp"
#include "store/ApiKeyStore.hpp"
#include "support/TestEnv.hpp"

namespace airlock::api {
namespace {
using nlohmann::json;
namespace fs = std::filesystem;

// The E2B control plane through the router, over the fake hypervisor.
class E2bApiTest : public FrontDoorsFixture {
  protected:
    E2bApiTest() {
        auto made = keys.create("t1", Role::agent, "agent");
        key = made.key;
        keyId = made.record.id;
        otherKey = keys.create("t2", Role::agent, "other").key;
        approverKey = keys.create("t1", Role::approver, "human").key;
    }

    ApiResponse call(const std::string& method, const std::string& path,
                     const std::string& body = {}, std::string withKey = "") {
        ApiRequest r;
        r.method = method;
        auto q = path.find('?');
        r.path = path.substr(0, q);
        if (q != std::string::npos) {
            std::string query = path.substr(q + 1);
            while (!query.empty()) {
                auto amp = query.find('&');
                auto part = query.substr(0, amp);
                auto eq = part.find('=');
                r.query[part.substr(0, eq)] = e2b::percentDecode(part.substr(eq + 1));
                query = amp == std::string::npos ? "" : query.substr(amp + 1);
            }
        }
        r.body = body;
        // The SDK's shape of the same key.
        std::string k = withKey.empty() ? key : withKey;
        r.headers["x-api-key"] = "e2b_" + k.substr(3);
        return router.handle(r);
    }

    std::string create(const std::string& body) {
        auto r = call("POST", "/v2/sandboxes", body);
        EXPECT_EQ(r.status, 201) << r.body;
        return json::parse(r.body).value("sandboxID", "");
    }

    std::string key, keyId, otherKey, approverKey;
};

TEST_F(E2bApiTest, CreateAnswersWhatTheSdkReads) {
    auto r =
        call("POST", "/sandboxes",
             R"({"templateID":"minimal","timeout":120,"metadata":{"k":"v"},"envVars":{"A":"1"},)"
             R"("secure":true,"allow_internet_access":true})");
    ASSERT_EQ(r.status, 201) << r.body;
    auto j = json::parse(r.body);
    std::string id = j["sandboxID"];
    EXPECT_EQ(j["templateID"], "minimal");
    EXPECT_EQ(j["clientID"], "airlock");
    EXPECT_EQ(j["envdVersion"], e2b::kEnvdVersion);
    EXPECT_EQ(j["envdAccessToken"], tokens.envdToken(id, keyId));
    EXPECT_EQ(j["domain"], "sbx.test");
    auto rec = controller->get("t1", id);
    EXPECT_EQ(rec.timeoutS, 120);
    EXPECT_EQ(json::parse(rec.metadataJson)["k"], "v");
    EXPECT_EQ(json::parse(rec.envJson)["A"], "1");
}

TEST_F(E2bApiTest, BadRequestsGetANumericCodeAndAMessage) {
    auto r = call("POST", "/v2/sandboxes", R"({"templateID":"minimal","bogus":1})");
    EXPECT_EQ(r.status, 400);
    auto j = json::parse(r.body);
    EXPECT_EQ(j["code"], 400);
    EXPECT_NE(j["message"].get<std::string>().find("bogus"), std::string::npos);
    EXPECT_EQ(call("POST", "/v2/sandboxes", R"({"templateID":"nope"})").status, 404);
    EXPECT_EQ(call("POST", "/v2/sandboxes", R"({"templateID":"minimal","timeout":-1})").status,
              400);
    // E2B's SDK reports a gateway that cannot start in these words; nothing is created.
    auto mcp = call("POST", "/v2/sandboxes", R"({"templateID":"minimal","mcp":{"x":1}})");
    EXPECT_EQ(mcp.status, 400);
    EXPECT_EQ(json::parse(mcp.body)["message"].get<std::string>().rfind(
                  "Failed to start MCP gateway", 0),
              0u)
        << mcp.body;
    EXPECT_TRUE(controller->list("t1").empty());
    // Routes E2B has and Airlock does not serve (or not yet) answer in E2B's
    // shape too, so the SDK prints the message, not "[object Object]".
    for (const char* path : {"/v4/templates", "/templates", "/volumes", "/sandboxes/x/y/z",
                             "/v2/nothing"}) {
        auto unknown = call("GET", path);
        EXPECT_EQ(unknown.status, 404) << path;
        auto body = json::parse(unknown.body);
        EXPECT_EQ(body["code"], 404) << unknown.body;
        EXPECT_TRUE(body["message"].is_string()) << unknown.body;
    }
    auto bad = call("GET", "/sandboxes/sbx-nope");
    EXPECT_EQ(bad.status, 404);
    EXPECT_EQ(json::parse(bad.body)["code"], 404);
    // No key, a wrong key, an approver key.
    ApiRequest none;
    none.method = "GET";
    none.path = "/v2/sandboxes";
    auto unauth = router.handle(none);
    EXPECT_EQ(unauth.status, 401);
    EXPECT_EQ(json::parse(unauth.body)["code"], 401);
    EXPECT_EQ(call("GET", "/v2/sandboxes", "", "ak_" + std::string(48, '0')).status, 401);
    EXPECT_EQ(call("GET", "/v2/sandboxes", "", approverKey).status, 403);
}

TEST_F(E2bApiTest, PortsArePublicUnlessRestricted) {
    auto open = json::parse(call("POST", "/v2/sandboxes", R"({"templateID":"minimal"})").body);
    EXPECT_TRUE(open["trafficAccessToken"].is_null());
    EXPECT_EQ(controller->get("t1", open["sandboxID"]).portAccess, "public");
    auto r = call("POST", "/v2/sandboxes", R"({"templateID":"minimal","network":{"allowPublicTraffic":false}})");
    ASSERT_EQ(r.status, 201) << r.body;
    auto closed = json::parse(r.body);
    std::string id = closed["sandboxID"];
    EXPECT_EQ(closed["trafficAccessToken"], tokens.trafficToken(id, keyId));
    EXPECT_EQ(controller->get("t1", id).portAccess, "token");
    auto info = json::parse(call("GET", "/sandboxes/" + id).body);
    EXPECT_EQ(info["network"]["allowPublicTraffic"], false);
    EXPECT_EQ(info["trafficAccessToken"], tokens.trafficToken(id, keyId));
}

TEST_F(E2bApiTest, AnotherTenantsSandboxDoesNotExist) {
    auto id = create(R"({"templateID":"minimal"})");
    for (auto [m, p] : std::vector<std::pair<std::string, std::string>>{
             {"GET", "/sandboxes/" + id},
             {"DELETE", "/sandboxes/" + id},
             {"POST", "/sandboxes/" + id + "/pause"}}) {
        auto r = call(m, p, "", otherKey);
        EXPECT_EQ(r.status, 404) << m << " " << p;
    }
    EXPECT_EQ(controller->get("t1", id).state, SandboxState::running);
}

TEST_F(E2bApiTest, ListFiltersByStateAndMetadataAndPages) {
    std::vector<std::string> ids;
    for (int i = 0; i < 3; ++i)
        ids.push_back(create(R"({"templateID":"minimal","metadata":{"suite":"a b&c"}})"));
    create(R"({"templateID":"minimal","metadata":{"suite":"other"}})");
    // {"suite":"a b&c"} encoded as the SDK does, once decoded by the HTTP layer.
    std::string filter = "metadata=suite%253Da%252520b%252526c";
    auto all = call("GET", "/v2/sandboxes?" + filter);
    ASSERT_EQ(all.status, 200) << all.body;
    EXPECT_EQ(json::parse(all.body).size(), 3u);
    auto page1 = call("GET", "/v2/sandboxes?" + filter + "&limit=2");
    ASSERT_EQ(json::parse(page1.body).size(), 2u);
    ASSERT_TRUE(page1.headers.count("X-Next-Token"));
    auto page2 = call(
        "GET", "/v2/sandboxes?" + filter + "&limit=2&nextToken=" + page1.headers["X-Next-Token"]);
    auto j2 = json::parse(page2.body);
    ASSERT_EQ(j2.size(), 1u);
    EXPECT_FALSE(page2.headers.count("X-Next-Token"));
    std::set<std::string> seen{json::parse(page1.body)[0]["sandboxID"],
                               json::parse(page1.body)[1]["sandboxID"], j2[0]["sandboxID"]};
    EXPECT_EQ(seen, std::set<std::string>(ids.begin(), ids.end()));
    EXPECT_EQ(call("GET", "/v2/sandboxes?limit=0").status, 400);
    // Pause one: the state filter sees it.
    ASSERT_EQ(call("POST", "/sandboxes/" + ids[0] + "/pause", "{}").status, 204);
    auto paused = json::parse(call("GET", "/v2/sandboxes?state=paused").body);
    ASSERT_EQ(paused.size(), 1u);
    EXPECT_EQ(paused[0]["sandboxID"], ids[0]);
    EXPECT_EQ(paused[0]["state"], "paused");
    EXPECT_EQ(call("GET", "/v2/sandboxes?state=gone").status, 400);
    // The other tenant sees none of them.
    EXPECT_EQ(json::parse(call("GET", "/v2/sandboxes", "", otherKey).body).size(), 0u);
}

// As E2B lists: the newest start first (ties by id), "asc" the exact
// reverse; a page token is a value (start time and id), so it stays good
// while sandboxes come and go; no token after the last page, a full one
// included; startedAfter is inclusive.
TEST_F(E2bApiTest, ListIsNewestFirstWithTokensThatOutliveTheirSandbox) {
    std::vector<std::string> ids, marks;  // oldest first; a time before each start
    for (int i = 0; i < 4; ++i) {
        marks.push_back(nowTimestamp());
        ids.push_back(create(R"({"templateID":"minimal","metadata":{"suite":"order"}})"));
        // Distinct start times (milliseconds): the next one starts later.
        std::string after = nowTimestamp();
        ASSERT_TRUE(test::waitFor([&] { return nowTimestamp() > after; }, std::chrono::seconds(2),
                                  std::chrono::milliseconds(1)));
    }
    const std::string filter = "metadata=suite%253Dorder";
    auto page = [&](const std::string& extra) {
        auto r = call("GET", "/v2/sandboxes?" + filter + extra);
        EXPECT_EQ(r.status, 200) << r.body;
        std::vector<std::string> got;
        for (const auto& s : json::parse(r.body)) got.push_back(s["sandboxID"]);
        std::string token = r.headers.count("X-Next-Token") ? r.headers["X-Next-Token"] : "";
        return std::make_pair(got, token);
    };
    EXPECT_EQ(page("").first, (std::vector<std::string>{ids[3], ids[2], ids[1], ids[0]}));
    EXPECT_EQ(page("&order=asc").first, ids);
    auto [first, token] = page("&limit=1");
    EXPECT_EQ(first, std::vector<std::string>{ids[3]}) << "the sandbox started last comes first";
    ASSERT_FALSE(token.empty());
    // The page's last sandbox goes; its token still leads on.
    ASSERT_EQ(call("DELETE", "/sandboxes/" + ids[3]).status, 204);
    auto [second, token2] = page("&limit=2&nextToken=" + token);
    EXPECT_EQ(second, (std::vector<std::string>{ids[2], ids[1]}));
    auto [third, token3] = page("&limit=1&nextToken=" + token2);
    EXPECT_EQ(third, std::vector<std::string>{ids[0]});
    EXPECT_EQ(token3, "") << "a full last page has no token";
    auto [ascending, ascToken] = page("&order=asc&limit=2");
    EXPECT_EQ(ascending, (std::vector<std::string>{ids[0], ids[1]}));
    EXPECT_EQ(page("&order=asc&limit=2&nextToken=" + ascToken).first,
              std::vector<std::string>{ids[2]});
    EXPECT_EQ(call("GET", "/v2/sandboxes?nextToken=" + ascToken).status, 400)
        << "a token of the other order";
    for (const char* bad : {"junk!", "bm90LWEtdG9rZW4", "order=up"}) {
        std::string q = std::string(bad) == "order=up" ? "order=up" : "nextToken=" + std::string(bad);
        EXPECT_EQ(call("GET", "/v2/sandboxes?" + q).status, 400) << bad;
    }
    // startedAfter: inclusive, in any RFC 3339 spelling.
    EXPECT_EQ(page("&startedAfter=" + marks[1]).first, (std::vector<std::string>{ids[2], ids[1]}));
    std::string seconds = marks[1].substr(0, 19) + "%2B00:00";  // no fraction, an offset
    EXPECT_EQ(page("&startedAfter=" + seconds).first.size() >= 2, true);
    EXPECT_EQ(call("GET", "/v2/sandboxes?startedAfter=yesterday").status, 400);
    EXPECT_TRUE(page("&startedAfter=2150-01-01T00:00:00%2B02:00").first.empty());
    EXPECT_TRUE(page("&startedAfter=9999-01-01T00:00:00Z").first.empty());
    EXPECT_EQ(page("&startedAfter=1900-01-01T00:00:00Z").first.size(), 3u);
}

TEST_F(E2bApiTest, PauseConnectAndTimeouts) {
    auto id = create(R"({"templateID":"minimal","timeout":100})");
    // Connect to a running one only ever extends its life.
    auto before = controller->get("t1", id).expiresAt;
    auto c = call("POST", "/v2/sandboxes/" + id + "/connect", R"({"timeout":10})");
    EXPECT_EQ(c.status, 200) << c.body;
    EXPECT_EQ(controller->get("t1", id).expiresAt, before);
    EXPECT_EQ(call("POST", "/sandboxes/" + id + "/connect", R"({"timeout":1000})").status, 200);
    EXPECT_GE(controller->get("t1", id).expiresAt, before + 800);
    // setTimeout may shorten it.
    EXPECT_EQ(call("POST", "/sandboxes/" + id + "/timeout", R"({"timeout":5})").status, 204);
    EXPECT_LE(controller->get("t1", id).expiresAt, before);
    // Pause twice: 409 with the code in the body.
    EXPECT_EQ(call("POST", "/sandboxes/" + id + "/pause", "").status, 204);
    auto again = call("POST", "/sandboxes/" + id + "/pause", "");
    EXPECT_EQ(again.status, 409);
    EXPECT_EQ(json::parse(again.body)["code"], 409);
    EXPECT_EQ(controller->get("t1", id).expiresAt, 0);  // a paused E2B sandbox waits
    // Connect resumes it: 201.
    auto resumed = call("POST", "/v2/sandboxes/" + id + "/connect", "{}");
    EXPECT_EQ(resumed.status, 201) << resumed.body;
    EXPECT_EQ(controller->get("t1", id).state, SandboxState::running);
    EXPECT_GT(controller->get("t1", id).expiresAt, 0);
    auto info = json::parse(call("GET", "/sandboxes/" + id).body);
    EXPECT_EQ(info["state"], "running");
    EXPECT_EQ(info["envdAccessToken"], tokens.envdToken(id, keyId));
    EXPECT_EQ(call("DELETE", "/sandboxes/" + id).status, 204);
    EXPECT_EQ(call("DELETE", "/sandboxes/" + id).status, 404);
}

// The figures are the guest's own (here the in-process agent reads this
// machine's /proc), sampled from the first ask on, and kept for the owner
// after the sandbox is gone; both doors read the same samples.
TEST_F(E2bApiTest, MetricsAreTheGuestsFiguresSampledFromTheFirstAskOn) {
    auto id = create(R"({"templateID":"minimal","timeout":100})");
    auto native = [&](const std::string& path) {
        ApiRequest r;
        r.method = "GET";
        r.path = path;
        r.authorization = "Bearer " + key;
        return router.handle(r);
    };
    auto metrics = [&](const std::string& query = "", const std::string& withKey = "") {
        auto r = call("GET", "/sandboxes/" + id + "/metrics" + query, "", withKey);
        EXPECT_EQ(r.status, 200) << r.body;
        return json::parse(r.body);
    };
    auto first = metrics();
    ASSERT_EQ(first.size(), 1u) << first;
    const json& m = first[0];
    for (const char* f : {"timestamp", "timestampUnix", "cpuCount", "cpuUsedPct", "memUsed",
                          "memTotal", "memCache", "diskUsed", "diskTotal"})
        EXPECT_TRUE(m.contains(f)) << f;
    EXPECT_GE(m["cpuCount"].get<int>(), 1);
    EXPECT_GE(m["cpuUsedPct"].get<double>(), 0);
    EXPECT_LE(m["cpuUsedPct"].get<double>(), 100);
    EXPECT_GT(m["memTotal"].get<std::uint64_t>(), 0u);
    EXPECT_LE(m["memUsed"].get<std::uint64_t>(), m["memTotal"].get<std::uint64_t>());
    EXPECT_GT(m["diskTotal"].get<std::uint64_t>(), 0u);
    EXPECT_LE(m["diskUsed"].get<std::uint64_t>(), m["diskTotal"].get<std::uint64_t>());
    EXPECT_LE(std::llabs(m["timestampUnix"].get<std::int64_t>() - nowUnixSeconds()), 5);
    EXPECT_TRUE(parseTimestamp(m["timestamp"].get<std::string>())) << m["timestamp"];

    // A round of the sampler adds one, oldest first; ranges narrow them.
    // (A rate needs the CPU counters to move: a round right after the last may add none.)
    json two;
    ASSERT_TRUE(test::waitFor(
        [&] {
            controller->metrics().sampleAll();
            return (two = metrics()).size() == 2;
        },
        std::chrono::seconds(5)))
        << two;
    EXPECT_LE(two[0]["timestampUnix"], two[1]["timestampUnix"]);
    auto now = std::to_string(nowUnixSeconds());
    auto hourAgo = std::to_string(nowUnixSeconds() - 3600);
    EXPECT_EQ(metrics("?start=" + hourAgo + "&end=" + std::to_string(nowUnixSeconds() - 1800)),
              json::array());
    EXPECT_EQ(metrics("?start=" + hourAgo + "&end=" + now).size(), 2u);
    EXPECT_EQ(call("GET", "/sandboxes/" + id + "/metrics?start=" + now + "&end=" + hourAgo).status,
              400);
    EXPECT_EQ(call("GET", "/sandboxes/" + id + "/metrics?start=yesterday").status, 400);
    EXPECT_EQ(call("GET", "/sandboxes/" + id + "/metrics", "", otherKey).status, 404);
    auto nativeAnswer = native("/v1/sandboxes/" + id + "/metrics");
    ASSERT_EQ(nativeAnswer.status, 200) << nativeAnswer.body;
    EXPECT_EQ(json::parse(nativeAnswer.body)["samples"].size(), 2u);

    // The latest of each named sandbox; none of another tenant's.
    auto batch = call("GET", "/sandboxes/metrics?sandbox_ids=" + id + ",sbx-nope");
    ASSERT_EQ(batch.status, 200) << batch.body;
    auto sandboxes = json::parse(batch.body)["sandboxes"];
    ASSERT_EQ(sandboxes.size(), 1u) << sandboxes;
    EXPECT_EQ(sandboxes[id], two[1]);
    EXPECT_TRUE(json::parse(call("GET", "/sandboxes/metrics?sandbox_ids=" + id, "", otherKey).body)
                    ["sandboxes"].empty());
    EXPECT_EQ(call("GET", "/sandboxes/metrics").status, 400);
    std::string many;
    for (int i = 0; i < 101; ++i) many += (i ? ",sbx-" : "sbx-") + std::to_string(i);
    EXPECT_EQ(call("GET", "/sandboxes/metrics?sandbox_ids=" + many).status, 400);

    // Gone: E2B keeps the samples for their owner; the native door says 404.
    EXPECT_EQ(call("DELETE", "/sandboxes/" + id).status, 204);
    controller->metrics().sampleAll();
    EXPECT_EQ(metrics().size(), 2u);
    EXPECT_EQ(metrics("", otherKey), json::array());
    EXPECT_EQ(native("/v1/sandboxes/" + id + "/metrics").status, 404);
}

// Snapshot names as E2B has them: [namespace/]alias[:tag], the namespace the
// tenant's; a name means the newest snapshot carrying it.
TEST_F(E2bApiTest, NamedSnapshotsAreFoundListedClonedAndDeletedByName) {
    auto id = create(R"({"templateID":"minimal","timeout":100})");
    auto snapshot = [&](const std::string& body) {
        return call("POST", "/sandboxes/" + id + "/snapshots", body);
    };
    auto named = snapshot(R"({"name":"Mine"})");
    ASSERT_EQ(named.status, 201) << named.body;
    EXPECT_EQ(json::parse(named.body),
              json::parse(R"({"snapshotID":"t1/mine:default","names":["t1/mine"]})"));
    auto v2 = snapshot(R"({"name":"t1/mine:v2.1"})");
    ASSERT_EQ(v2.status, 201) << v2.body;
    EXPECT_EQ(json::parse(v2.body)["snapshotID"], "t1/mine:v2.1");
    for (const char* bad : {R"({"name":"other/mine"})", R"({"name":"bad name"})",
                            R"({"name":"mine:"})", R"({"name":5})", R"({"name":"a/b/c"})"})
        EXPECT_EQ(snapshot(bad).status, 400) << bad;

    auto listed = [&](const std::string& name) {
        auto r = call("GET", "/snapshots?name=" + name);
        EXPECT_EQ(r.status, 200) << r.body;
        return json::parse(r.body);
    };
    EXPECT_EQ(listed("mine").size(), 2u) << "a bare name: any tag";
    EXPECT_EQ(listed("mine:v2.1").size(), 1u);
    EXPECT_EQ(listed("t1%2Fmine%3Adefault").size(), 1u);
    EXPECT_TRUE(listed("yours").empty());
    EXPECT_EQ(call("GET", "/snapshots?name=x%2Fmine").status, 400);

    // A create from the name clones the newest snapshot carrying it.
    auto cloneOf = [&](const std::string& templateId) {
        auto r = call("POST", "/v2/sandboxes", R"({"templateID":")" + templateId + R"("})");
        EXPECT_EQ(r.status, 201) << templateId << ": " << r.body;
        return controller->get("t1", json::parse(r.body)["sandboxID"]).snapshotId;
    };
    auto idOf = [&](const std::string& tag) {  // the newest carrying the tag
        std::pair<std::string, std::string> newest;
        for (const auto& s : controller->snapshots().list("t1"))
            if (s.name.tag == tag) newest = std::max(newest, std::make_pair(s.createdAt, s.id));
        return newest.second;
    };
    EXPECT_EQ(cloneOf("t1/mine:default"), idOf("default"));
    EXPECT_EQ(cloneOf("mine:v2.1"), idOf("v2.1"));
    auto first = idOf("default");
    ASSERT_EQ(snapshot(R"({"name":"mine"})").status, 201);
    ASSERT_NE(idOf("default"), first);
    EXPECT_EQ(cloneOf("t1/mine"), idOf("default")) << "the newest";
    // A bare name is a template's: a snapshot never stands in for one.
    ASSERT_EQ(snapshot(R"({"name":"minimal"})").status, 201);
    auto plain = call("POST", "/v2/sandboxes", R"({"templateID":"minimal"})");
    ASSERT_EQ(plain.status, 201) << plain.body;
    EXPECT_EQ(controller->get("t1", json::parse(plain.body)["sandboxID"]).snapshotId, "");
    // A name may begin as ids do (E2B's own tests name them so): only with
    // its namespace or tag is it a name, bare it is an id.
    ASSERT_EQ(snapshot(R"({"name":"snap-x"})").status, 201);
    std::string snapX;
    for (const auto& s : controller->snapshots().list("t1"))
        if (s.name.alias == "snap-x") snapX = s.id;
    EXPECT_EQ(cloneOf("t1/snap-x"), snapX);
    EXPECT_EQ(call("POST", "/v2/sandboxes", R"({"templateID":"snap-x"})").status, 404);
    EXPECT_EQ(call("DELETE", "/templates/snap-x").status, 404);
    EXPECT_EQ(call("DELETE", "/templates/snap-x:default").status, 204);
    EXPECT_EQ(call("POST", "/v2/sandboxes", R"({"templateID":"t1/nothing"})").status, 404);
    // Another tenant's name means nothing to it.
    EXPECT_TRUE(json::parse(call("GET", "/snapshots?name=mine", "", otherKey).body).empty());

    EXPECT_EQ(call("DELETE", "/templates/mine:v2.1").status, 204);
    EXPECT_EQ(listed("mine").size(), 2u);
    EXPECT_EQ(call("DELETE", "/templates/t1%2Fmine").status, 204) << "every tag";
    EXPECT_TRUE(listed("mine").empty());
    EXPECT_EQ(call("DELETE", "/templates/t1%2Fminimal", "", otherKey).status, 404)
        << "another tenant's name is nothing to it";
    EXPECT_EQ(call("DELETE", "/templates/mine").status, 404);
}

// E2B's snapshot and fork routes over Airlock's snapshots and clones.
TEST_F(E2bApiTest, SnapshotsAndForksAsTheSdkCallsThem) {
    auto id = create(
        R"({"templateID":"minimal","timeout":100,"metadata":{"k":"v"},"envVars":{"A":"1"}})");
    auto snapshot = [&](const std::string& body = "{}") {
        return call("POST", "/sandboxes/" + id + "/snapshots", body);
    };
    auto first = snapshot();
    ASSERT_EQ(first.status, 201) << first.body;
    std::string snap = json::parse(first.body)["snapshotID"];
    EXPECT_EQ(snap.rfind("snap-", 0), 0u);
    EXPECT_EQ(json::parse(first.body)["names"], json::array());
    EXPECT_EQ(controller->get("t1", id).state, SandboxState::running) << "the source goes on";
    EXPECT_EQ(call("POST", "/sandboxes/" + id + "/snapshots", "{}", otherKey).status, 404);
    auto second = json::parse(snapshot().body)["snapshotID"].get<std::string>();

    auto list = [&](const std::string& query) {
        auto r = call("GET", "/snapshots" + query);
        EXPECT_EQ(r.status, 200) << r.body;
        return std::make_pair(json::parse(r.body), r.headers);
    };
    EXPECT_EQ(list("").first.size(), 2u);
    EXPECT_EQ(list("?sandboxID=" + id).first.size(), 2u);
    EXPECT_TRUE(list("?sandboxID=sbx-other").first.empty());
    EXPECT_TRUE(list("?name=mine").first.empty());
    auto [page1, headers] = list("?limit=1");
    ASSERT_EQ(page1.size(), 1u);
    EXPECT_EQ(page1[0]["snapshotID"], second) << "newest first";
    ASSERT_TRUE(headers.count("X-Next-Token"));
    auto page2 = list("?limit=1&nextToken=" + headers["X-Next-Token"]);
    ASSERT_EQ(page2.first.size(), 1u);
    EXPECT_EQ(page2.first[0]["snapshotID"], snap);
    EXPECT_FALSE(page2.second.count("X-Next-Token"));
    EXPECT_EQ(call("GET", "/snapshots?nextToken=junk").status, 400);
    EXPECT_TRUE(json::parse(call("GET", "/snapshots", "", otherKey).body).empty());

    // A snapshot's id is a template to create from: a clone.
    auto cloned = call("POST", "/v2/sandboxes", R"({"templateID":")" + snap + R"("})");
    ASSERT_EQ(cloned.status, 201) << cloned.body;
    EXPECT_EQ(controller->get("t1", json::parse(cloned.body)["sandboxID"]).templateName, "minimal");

    // Fork: count clones of a snapshot taken now, each {sandbox} or {error}.
    auto forked = call("POST", "/sandboxes/" + id + "/fork", R"({"count":2,"timeout":60})");
    ASSERT_EQ(forked.status, 201) << forked.body;
    auto forks = json::parse(forked.body);
    ASSERT_EQ(forks.size(), 2u);
    for (const auto& f : forks) {
        ASSERT_TRUE(f.contains("sandbox")) << f;
        auto rec = controller->get("t1", f["sandbox"]["sandboxID"]);
        EXPECT_EQ(json::parse(rec.metadataJson)["k"], "v");
        EXPECT_EQ(json::parse(rec.envJson)["A"], "1") << "the source's settings";
        EXPECT_EQ(rec.timeoutS, 60);
    }
    EXPECT_EQ(list("").first.size(), 2u) << "a fork's snapshot is not listed";
    EXPECT_EQ(call("POST", "/sandboxes/" + id + "/fork", R"({"count":0})").status, 400);
    EXPECT_EQ(call("POST", "/sandboxes/" + id + "/fork", R"({"count":101})").status, 400);
    EXPECT_EQ(call("POST", "/sandboxes/sbx-nope/fork", "{}").status, 404);

    EXPECT_EQ(call("DELETE", "/templates/" + snap).status, 204);
    EXPECT_EQ(call("DELETE", "/templates/" + snap).status, 404);
    EXPECT_EQ(call("DELETE", "/templates/base").status, 404);
    EXPECT_EQ(list("").first.size(), 1u);
}

// E2B's updateNetwork: the body replaces the egress rules of a running
// sandbox; what Airlock cannot do is refused, not ignored.
TEST_F(E2bApiTest, UpdateNetworkReplacesARunningSandboxsRules) {
    auto id = create(R"({"templateID":"minimal"})");
    auto put = [&](const std::string& body, const std::string& sandbox = "") {
        return call("PUT", "/sandboxes/" + (sandbox.empty() ? id : sandbox) + "/network", body)
            .status;
    };
    EXPECT_EQ(put("{}"), 204) << "omitted fields clear the rules";
    EXPECT_TRUE(controller->get("t1", id).network.empty());
    EXPECT_EQ(put(R"({"denyOut":["8.8.8.8"],"allow_internet_access":false})"), 204);
    for (const char* bad :
         {R"({"allowOut":"x"})", R"({"allowOut":[1]})", R"({"denyOut":{}})",
          R"({"egressProxy":{"url":"http://p"}})", R"({"rules":{"a.com":[{}]}})",
          R"({"maskRequestHost":"h"})", "[]", ""})
        EXPECT_EQ(put(bad), 400) << bad;
    EXPECT_EQ(put("{}", "sbx-aaaaaaaaaaaaaaaaaaaa"), 404);
    ASSERT_EQ(call("POST", "/sandboxes/" + id + "/pause", "{}").status, 204);
    EXPECT_EQ(put("{}"), 409) << "only a running sandbox's rules change";
}

// E2B's auto-resume: traffic to a sandbox paused with its memory wakes it,
// with a timeout again; without the flag it stays paused (502).
TEST_F(E2bApiTest, AutoResumeWakesAPausedSandboxOnTraffic) {
    EXPECT_EQ(call("POST", "/v2/sandboxes",
                   R"({"templateID":"minimal","autoResume":{"enabled":true}})")
                  .status,
              400)
        << "auto-resume needs autoPause";
    EXPECT_EQ(call("POST", "/v2/sandboxes",
                   R"({"templateID":"minimal","autoPause":true,"autoPauseMemory":false,)"
                   R"("autoResume":{"enabled":true}})")
                  .status,
              400)
        << "a pause without memory boots only on connect";
    auto waking = create(
        R"({"templateID":"minimal","timeout":100,"autoPause":true,"autoResume":{"enabled":true}})");
    auto sleeping = create(R"({"templateID":"minimal","timeout":100,"autoPause":true})");
    EXPECT_EQ(json::parse(call("GET", "/sandboxes/" + waking).body)["lifecycle"]["autoResume"],
              true);
    EXPECT_EQ(json::parse(call("GET", "/sandboxes/" + sleeping).body)["lifecycle"]["autoResume"],
              false);
    auto envd = [&](const std::string& id, const std::string& token, const char* method,
                    const char* path) {
        ApiRequest r;
        r.method = method;
        r.path = path;
        r.headers["e2b-sandbox-id"] = id;
        r.headers["e2b-sandbox-port"] = std::to_string(e2b::kEnvdPort);
        if (!token.empty()) r.headers["x-access-token"] = token;
        if (r.method == "POST") {
            r.contentType = "application/json";
            r.body = "{}";
        }
        return router.handle(r).status;
    };
    auto health = [&](const std::string& id, const std::string& token) {
        return envd(id, token, "GET", "/health");
    };
    for (const auto& id : {waking, sleeping})
        ASSERT_EQ(call("POST", "/sandboxes/" + id + "/pause", "{}").status, 204);
    EXPECT_EQ(controller->get("t1", waking).expiresAt, 0) << "paused: no timeout";
    EXPECT_EQ(health(sleeping, tokens.envdToken(sleeping, keyId)), 502);
    EXPECT_EQ(controller->get("t1", sleeping).state, SandboxState::paused);
    // Only traffic its access rule lets through wakes it.
    EXPECT_EQ(health(waking, ""), 502);
    EXPECT_EQ(health(waking, "forged.token"), 502);
    EXPECT_EQ(envd(waking, "forged.token", "POST", "/process.Process/List"), 401);
    EXPECT_EQ(controller->get("t1", waking).state, SandboxState::paused);
    EXPECT_EQ(envd(waking, tokens.envdToken(waking, keyId), "POST", "/process.Process/List"),
              200);
    EXPECT_EQ(controller->get("t1", waking).state, SandboxState::running);
    ASSERT_EQ(call("POST", "/sandboxes/" + waking + "/pause", "{}").status, 204);
    EXPECT_EQ(health(waking, tokens.envdToken(waking, keyId)), 204);
    auto woken = controller->get("t1", waking);
    EXPECT_EQ(woken.state, SandboxState::running);
    EXPECT_GT(woken.expiresAt, 0) << "a life again, as after a connect";

    // Admission only names the wake: the HTTP session runs it on a worker
    // (a resume waits on the sandbox's lock and on libvirt), never on the
    // I/O thread that admits every request.
    ASSERT_EQ(call("POST", "/sandboxes/" + waking + "/pause", "{}").status, 204);
    ApiRequest list;
    list.method = "POST";
    list.path = "/process.Process/List";
    list.headers["e2b-sandbox-id"] = waking;
    list.headers["e2b-sandbox-port"] = std::to_string(e2b::kEnvdPort);
    list.headers["x-access-token"] = tokens.envdToken(waking, keyId);
    auto selection = router.select(list);
    auto admission = router.admit(list, selection);
    ASSERT_TRUE(admission.wake);
    EXPECT_EQ(controller->get("t1", waking).state, SandboxState::paused);
    admission.wake();
    EXPECT_EQ(controller->get("t1", waking).state, SandboxState::running);
    // The wake reads the sandbox again: resumed meanwhile, it does nothing;
    // deleted meanwhile, it is unreachable (502), not resurrected.
    ASSERT_EQ(call("POST", "/sandboxes/" + waking + "/pause", "{}").status, 204);
    auto late = router.admit(list, selection);
    ASSERT_TRUE(late.wake);
    controller->resume("t1", waking);
    EXPECT_NO_THROW(late.wake());
    ASSERT_EQ(call("POST", "/sandboxes/" + waking + "/pause", "{}").status, 204);
    auto gone = router.admit(list, selection);
    ASSERT_TRUE(gone.wake);
    controller->destroy("t1", waking);
    try {
        gone.wake();
        ADD_FAILURE() << "a deleted sandbox was woken";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::sandbox_unreachable);
    }
}

// envd's polled watchers (E2B's Python sync SDK): events wait for the next
// poll, then are cleared; ids are per sandbox; removal ends the guest's watch.
TEST_F(E2bApiTest, PolledWatchersKeepEventsUntilTheNextPoll) {
    auto id = create(R"({"templateID":"minimal","timeout":100})");
    std::string token = tokens.envdToken(id, keyId);
    auto rpc = [&](const std::string& method, const json& body, const std::string& sandbox = "") {
        ApiRequest r;
        r.method = "POST";
        r.path = "/filesystem.Filesystem/" + method;
        r.contentType = "application/json";
        r.body = body.dump();
        r.headers["e2b-sandbox-id"] = sandbox.empty() ? id : sandbox;
        r.headers["e2b-sandbox-port"] = std::to_string(e2b::kEnvdPort);
        r.headers["x-access-token"] = token;
        r.authorization = "Basic cm9vdDo=";  // root: the in-process agent's files are this host's
        return router.handle(r);
    };
    test::TempDir dir;
    auto created = rpc("CreateWatcher", {{"path", dir.path()}, {"recursive", true},
                                         {"includeEntry", true}});
    ASSERT_EQ(created.status, 200) << created.body;
    std::string watcher = json::parse(created.body)["watcherId"];
    EXPECT_EQ(watcher.size(), 21u);
    EXPECT_EQ(watcher[0], 'w');
    std::ofstream(dir.path() + "/seen.txt") << "x";
    json events = json::array();
    ASSERT_TRUE(test::waitFor(
        [&] {
            auto got = json::parse(rpc("GetWatcherEvents", {{"watcherId", watcher}}).body);
            for (const auto& e : got.value("events", json::array())) events.push_back(e);
            for (const auto& e : events)
                if (e["name"] == "seen.txt" && e["type"] == "EVENT_TYPE_WRITE") return true;
            return false;
        },
        std::chrono::seconds(10)))
        << events;
    auto write = std::find_if(events.begin(), events.end(),
                              [](const json& e) { return e["type"] == "EVENT_TYPE_WRITE"; });
    EXPECT_EQ((*write)["entry"]["type"], "FILE_TYPE_FILE");
    // Cleared once read.
    EXPECT_EQ(json::parse(rpc("GetWatcherEvents", {{"watcherId", watcher}}).body), json::object());
    // Refusals, as envd's.
    auto missing = rpc("CreateWatcher", {{"path", dir.path() + "/nope"}});
    EXPECT_EQ(missing.status, 404) << missing.body;
    EXPECT_EQ(json::parse(missing.body)["code"], "not_found");
    EXPECT_EQ(rpc("GetWatcherEvents", {{"watcherId", "wnosuchwatcher0000000"}}).status, 404);
    // Another sandbox's watcher does not exist for this one.
    auto other = create(R"({"templateID":"minimal","timeout":100})");
    std::string ownToken = token;
    token = tokens.envdToken(other, keyId);
    EXPECT_EQ(rpc("GetWatcherEvents", {{"watcherId", watcher}}, other).status, 404);
    token = ownToken;
    EXPECT_EQ(rpc("RemoveWatcher", {{"watcherId", watcher}}).status, 200);
    EXPECT_EQ(rpc("GetWatcherEvents", {{"watcherId", watcher}}).status, 404);
    EXPECT_EQ(rpc("RemoveWatcher", {{"watcherId", watcher}}).status, 404);

    // Ended watchers wait to be polled, but only so many per sandbox: the
    // oldest go first when more end than the bound keeps.
    std::vector<std::string> ended;
    auto endedWith = [&](const std::string& w) {
        auto r = rpc("GetWatcherEvents", {{"watcherId", w}});
        return r.status == 404 ? json::parse(r.body).value("message", "") : std::string("live");
    };
    for (std::size_t i = 0; i < e2b::E2bWatchers::kMaxEndedPerSandbox + 4; ++i) {
        std::string sub = dir.path() + "/gone-" + std::to_string(i);
        fs::create_directories(sub);
        auto made = rpc("CreateWatcher", {{"path", sub}});
        ASSERT_EQ(made.status, 200) << made.body;
        ended.push_back(json::parse(made.body)["watcherId"]);
        fs::remove_all(sub);  // the watched directory goes: the watch ends
        ASSERT_TRUE(test::waitFor(
            [&] { return endedWith(ended.back()).find("gone") != std::string::npos; },
            std::chrono::seconds(10)))
            << endedWith(ended.back());
    }
    ASSERT_EQ(rpc("CreateWatcher", {{"path", dir.path()}}).status, 200);
    for (std::size_t i = 0; i < ended.size(); ++i) {
        bool kept = i >= 4;
        EXPECT_EQ(endedWith(ended[i]).find("not found") != std::string::npos, !kept)
            << i << ": " << endedWith(ended[i]);
    }
}

// Attack 12 of "the record the agent cannot bend": an envd access token was
// an HMAC of the sandbox id alone and outlived the key that fetched it. Now
// it names that key and works only while the key does.
class RecordIntegrityE2b : public E2bApiTest {};

TEST_F(RecordIntegrityE2b, EnvdAccessTokensDieWithTheKeyThatMintedThem) {
    // A second key of the tenant, made to be revoked; the sandbox is made through the E2B door.
    auto doomed = keys.create("t1", Role::agent, "doomed");
    auto created = call("POST", "/v2/sandboxes", R"({"templateID":"minimal"})", doomed.key);
    ASSERT_EQ(created.status, 201) << created.body;
    auto j = json::parse(created.body);
    std::string id = j["sandboxID"], token = j["envdAccessToken"];
    // The key that created it fetches its own token for the same sandbox.
    std::string survivor = json::parse(call("GET", "/sandboxes/" + id).body)["envdAccessToken"];
    EXPECT_NE(token, survivor);
    // envd's rows through the one route table, as the HTTP session sends them.
    auto request = [&](const std::string& t) {
        ApiRequest r;
        r.method = "POST";
        r.path = "/process.Process/List";
        r.contentType = "application/json";
        r.body = "{}";
        r.headers["e2b-sandbox-id"] = id;
        r.headers["e2b-sandbox-port"] = std::to_string(e2b::kEnvdPort);
        r.headers["x-access-token"] = t;
        return r;
    };
    auto status = [&](const std::string& t) { return router.handle(request(t)).status; };
    EXPECT_EQ(status(token), 200);
    EXPECT_EQ(status(survivor), 200);
    // Forged or misplaced tokens: another sandbox's, the traffic kind, a key id swapped in.
    EXPECT_EQ(status(tokens.envdToken("sbx-other", doomed.record.id)), 401);
    EXPECT_EQ(status(tokens.trafficToken(id, doomed.record.id)), 401);
    EXPECT_EQ(status(keyId + token.substr(token.find('.'))), 401);
    // Another tenant's live key does not make a token for this sandbox.
    auto other = keys.create("t2", Role::agent, "t2-agent");
    EXPECT_EQ(status(tokens.envdToken(id, other.record.id)), 401);

    // The attack: revoke the minting key, keep using its token.
    ASSERT_TRUE(keys.remove(doomed.record.id));
    auto answer = router.handle(request(token));
    EXPECT_EQ(answer.status, 401) << answer.body;
    EXPECT_EQ(json::parse(answer.body)["code"], "unauthenticated") << "Connect's shape";
    // A download (a stream row) is admitted by the same function.
    ApiRequest download = request(token);
    download.method = "GET";
    download.path = "/files";
    download.query["path"] = "/etc/hostname";
    auto selection = router.select(download);
    ASSERT_TRUE(selection.route());
    try {
        router.admit(download, selection);
        ADD_FAILURE() << "a revoked key's envd token was admitted to a download";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::unauthorized);
    }
    // The live key's token still works.
    EXPECT_EQ(status(survivor), 200);
    // An expired key is as dead as a revoked one.
    auto expired = keys.create("t1", Role::agent, "expired", nowUnixSeconds() - 1);
    EXPECT_EQ(status(tokens.envdToken(id, expired.record.id)), 401);
}

// GET/POST /files without X-Access-Token: a signed URL, as the SDK's
// downloadUrl/uploadUrl make them, with the token of a key that drives the
// sandbox now; bound to the path, the operation, the user and the expiry.
TEST_F(RecordIntegrityE2b, SignedFileUrlsHoldOnlyForWhatTheySignWhileTheirKeyLives) {
    auto doomed = keys.create("t1", Role::agent, "doomed");
    auto id = create(R"({"templateID":"minimal"})");
    auto files = [&](const std::string& method, std::map<std::string, std::string> query) {
        ApiRequest r;
        r.method = method;
        r.path = "/files";
        r.query = std::move(query);
        r.headers["e2b-sandbox-id"] = id;
        r.headers["e2b-sandbox-port"] = std::to_string(e2b::kEnvdPort);
        auto selection = router.select(r);
        EXPECT_TRUE(selection.route());
        try {
            auto admitted = router.admit(r, selection);
            return "admitted as " + admitted.principal.keyId;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::unauthorized) << e.what();
            return std::string(e.what());
        }
    };
    auto signedBy = [&](const std::string& key, const std::string& op, const std::string& path,
                        std::optional<std::int64_t> exp, const std::string& user = "") {
        std::map<std::string, std::string> q{{"path", path}};
        if (!user.empty()) q["username"] = user;
        q["signature"] = e2b::fileSignature(path, op, user, tokens.envdToken(id, key), exp);
        if (exp) q["signature_expiration"] = std::to_string(*exp);
        return q;
    };
    auto later = nowUnixSeconds() + 600;
    EXPECT_EQ(files("GET", signedBy(keyId, "read", "/etc/hostname", later)), "admitted as " + keyId);
    EXPECT_EQ(files("POST", signedBy(keyId, "write", "/tmp/up", std::nullopt, "root")),
              "admitted as " + keyId);
    // Any live key of the tenant (it could fetch the token too).
    EXPECT_EQ(files("GET", signedBy(doomed.record.id, "read", "/etc/hostname", later)),
              "admitted as " + doomed.record.id);
    EXPECT_EQ(files("GET", {{"path", "/etc/hostname"}}), "missing signature query parameter");
    // What the signature does not cover: another path, operation, user.
    auto read = signedBy(keyId, "read", "/etc/hostname", later);
    EXPECT_EQ(files("POST", read), "invalid signature");
    auto moved = read;
    moved["path"] = "/etc/shadow";
    EXPECT_EQ(files("GET", moved), "invalid signature");
    auto asRoot = read;
    asRoot["username"] = "root";
    EXPECT_EQ(files("GET", asRoot), "invalid signature");
    auto extended = read;
    extended["signature_expiration"] = std::to_string(later + 1);
    EXPECT_EQ(files("GET", extended), "invalid signature");
    EXPECT_EQ(files("GET", signedBy(keyId, "read", "/etc/hostname", nowUnixSeconds() - 1)),
              "signature is already expired");
    // Another tenant's key, an approver's, a revoked one: none signs for it.
    auto other = keys.create("t2", Role::agent, "t2-agent");
    EXPECT_EQ(files("GET", signedBy(other.record.id, "read", "/etc/hostname", later)),
              "invalid signature");
    auto approver = keys.create("t1", Role::approver, "human2");
    EXPECT_EQ(files("GET", signedBy(approver.record.id, "read", "/etc/hostname", later)),
              "invalid signature");
    auto before = signedBy(doomed.record.id, "read", "/etc/hostname", later);
    ASSERT_TRUE(keys.remove(doomed.record.id));
    EXPECT_EQ(files("GET", before), "invalid signature");
    // A wrong header token is not rescued by a good signature.
    auto withHeader = signedBy(keyId, "read", "/etc/hostname", later);
    ApiRequest r;
    r.method = "GET";
    r.path = "/files";
    r.query = withHeader;
    r.headers["e2b-sandbox-id"] = id;
    r.headers["e2b-sandbox-port"] = std::to_string(e2b::kEnvdPort);
    r.headers["x-access-token"] = "forged.token";
    EXPECT_THROW(router.admit(r, router.select(r)), Error);

    // One URL for all sandboxes (E2B_SANDBOX_URL): nothing names the
    // sandbox but the signature, made with that sandbox's token only.
    auto other2 = create(R"({"templateID":"minimal"})");
    auto unnamed = [&](std::map<std::string, std::string> query) {
        ApiRequest u;
        u.method = "GET";
        u.path = "/files";
        u.query = std::move(query);
        auto selection = router.select(u);
        EXPECT_EQ(selection.door, Door::e2b_envd);
        EXPECT_EQ(selection.sandboxId, id);
        return router.admit(u, selection).principal.keyId;
    };
    EXPECT_EQ(unnamed(signedBy(keyId, "read", "/etc/hostname", later)), keyId);
    ApiRequest u0;
    u0.method = "GET";
    u0.path = "/files";
    auto fresh = keys.create("t1", Role::agent, "fresh");
    EXPECT_EQ(unnamed(signedBy(fresh.record.id, "read", "/etc/hostname", later)),
              fresh.record.id);
    u0.query = before;  // its key is gone: no sandbox is named by it
    EXPECT_THROW(router.select(u0), Error);
    ApiRequest u;
    u.method = "GET";
    u.path = "/files";
    u.query = moved;  // signed by no sandbox's token
    try {
        router.select(u);
        ADD_FAILURE() << "a signature no sandbox made selected one";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::unauthorized);
    }
    u.query = {{"path", "/etc/hostname"}};
    try {
        router.select(u);
        ADD_FAILURE() << "an unsigned /files naming no sandbox was routed";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::bad_request);
        EXPECT_NE(std::string(e.what()).find("names its sandbox"), std::string::npos) << e.what();
    }
    // A paused sandbox's tokens sign nothing.
    controller->pause("t1", other2);
    std::map<std::string, std::string> q{{"path", "/x"}};
    q["signature"] = e2b::fileSignature("/x", "read", "", tokens.envdToken(other2, keyId), later);
    q["signature_expiration"] = std::to_string(later);
    u.query = q;
    EXPECT_THROW(router.select(u), Error);
}

TEST_F(RecordIntegrityE2b, TrafficTokensDieWithTheKeyThatMintedThem) {
    auto doomed = keys.create("t1", Role::agent, "doomed");
    auto created = call("POST", "/v2/sandboxes",
                        R"({"templateID":"minimal","network":{"allowPublicTraffic":false}})",
                        doomed.key);
    ASSERT_EQ(created.status, 201) << created.body;
    auto j = json::parse(created.body);
    std::string id = j["sandboxID"], traffic = j["trafficAccessToken"];
    ApiRequest head;
    head.method = "GET";
    head.path = "/";
    head.headers["e2b-traffic-access-token"] = traffic;
    E2bEnvd::Target target{id, 8080, ""};
    EXPECT_NO_THROW(envd.routePort(head, target));
    ASSERT_TRUE(keys.remove(doomed.record.id));
    EXPECT_THROW(envd.routePort(head, target), Error);
}

// Attack 7: E2B port routing (and preview ports) reached the guest's egress
// proxy and package proxies. Their ports are refused before anything opens,
// for an E2B sandbox (public ports) and a native one alike.
TEST_F(RecordIntegrityE2b, PortRoutingNeverReachesTheGuestsOwnProxies) {
    std::string e2bId = create(R"({"templateID":"minimal"})");
    ASSERT_EQ(controller->get("t1", e2bId).portAccess, "public");
    CreateSandboxRequest native;
    native.templateName = "minimal";
    std::string nativeId = controller->create("t1", native).id;
    // The internal ports come from the gateways' listeners.
    auto internal = controller->ports().internalPorts();
    for (unsigned p : {egress::kGuestProxyPort, packages::kGuestNpmPort, packages::kGuestPypiPort,
                       packages::kGuestAptPort})
        EXPECT_NE(std::find(internal.begin(), internal.end(), p), internal.end()) << p;
    for (const std::string& id : {e2bId, nativeId}) {
        for (unsigned port : internal) {
            // By header (E2b-Sandbox-Id / -Port) and by Host: the same target.
            for (const char* how : {"header", "host"}) {
                ApiRequest head;
                head.method = "GET";
                head.path = "/";
                if (std::string(how) == "header") {
                    head.headers["e2b-sandbox-id"] = id;
                    head.headers["e2b-sandbox-port"] = std::to_string(port);
                } else {
                    head.host = std::to_string(port) + "-" + id + ".sbx.test";
                }
                auto target = envd.target(head);
                ASSERT_TRUE(target) << how;
                EXPECT_FALSE(target->envd());
                try {
                    envd.routePort(head, *target);
                    ADD_FAILURE() << "port " << port << " of " << id << " routed by " << how;
                } catch (const Error& e) {
                    EXPECT_EQ(e.code(), ErrorCode::forbidden);
                    auto answer = router.errorFor(router.select(head), head,
                                                  std::current_exception());
                    EXPECT_EQ(answer.status, 403);
                    EXPECT_EQ(json::parse(answer.body)["code"], 403) << answer.body;
                }
            }
            // The native preview-port route refuses to expose it, and no
            // tunnel opens to it whatever the caller holds.
            try {
                controller->ports().expose("t1", id, port);
                ADD_FAILURE() << "port " << port << " exposed";
            } catch (const Error& e) {
                EXPECT_EQ(e.code(), ErrorCode::forbidden);
            }
            EXPECT_THROW(controller->ports().openTunnel("t1", id, port, [](AgentStream::Event&&) {}),
                         Error);
            EXPECT_THROW(
                controller->ports().openPreview(id, port, "any", [](AgentStream::Event&&) {}),
                Error);
        }
    }
    // An ordinary port of the E2B sandbox still routes (E2B's public ports).
    E2bEnvd::Target web{e2bId, 8080, ""};
    EXPECT_NO_THROW(envd.routePort(ApiRequest{}, web));
    EXPECT_NO_THROW(controller->ports().expose("t1", nativeId, 8080));
}

}  // namespace
}  // namespace airlock::api

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>

#include "../controller/ControllerFixture.hpp"
#include "api/Router.hpp"
#include "store/ApiKeyStore.hpp"

namespace airlock::api {
namespace {
using nlohmann::json;

class RouterTest : public test::ControllerFixture {
  protected:
    RouterTest() : keys(*db), auth(keys), router(controller->frontDoorServices(), auth, keys, "test") {
        key = keys.create("t1", Role::agent, "test").key;
        otherKey = keys.create("t2", Role::agent, "other").key;
    }

    ApiResponse call(const std::string& method, const std::string& path,
                     const std::string& body = {}, const std::string& withKey = "default") {
        ApiRequest r;
        r.method = method;
        r.path = path;
        r.body = body;
        std::string k = withKey == "default" ? key : withKey;
        if (!k.empty()) r.authorization = "Bearer " + k;
        return router.handle(r);
    }

    ApiKeyStore keys;
    Authenticator auth;
    Router router;
    std::string key, otherKey;
};

std::string errorCode(const ApiResponse& r) { return json::parse(r.body)["error"]["code"]; }

TEST_F(RouterTest, HealthzNeedsNoKey) {
    auto r = call("GET", "/healthz", "", "");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(json::parse(r.body)["accel"], "tcg");
}

TEST_F(RouterTest, MissingOrWrongKeyIs401) {
    EXPECT_EQ(call("GET", "/v1/sandboxes", "", "").status, 401);
    EXPECT_EQ(call("GET", "/v1/sandboxes", "", "wrong").status, 401);
    EXPECT_EQ(errorCode(call("GET", "/v1/sandboxes", "", "wrong")), "unauthorized");
    ApiRequest basic{"GET", "/v1/sandboxes", {}, "Basic abc", "", "", "", {}, {}};
    EXPECT_EQ(router.handle(basic).status, 401);
}

TEST_F(RouterTest, UnknownRouteAndWrongMethod) {
    EXPECT_EQ(call("GET", "/v1/nothing").status, 404);
    EXPECT_EQ(call("PATCH", "/v1/sandboxes").status, 405);
}

TEST_F(RouterTest, BadBodiesAre400) {
    EXPECT_EQ(call("POST", "/v1/sandboxes", R"({"template": "minimal",)").status, 400);
    EXPECT_EQ(call("POST", "/v1/sandboxes", R"({"template":"minimal","bogus_field":1})").status,
              400);
    EXPECT_EQ(call("POST", "/v1/sandboxes", R"({"template":"no-such-template"})").status, 404);
}

TEST_F(RouterTest, CreateExecDeleteLifecycle) {
    auto created =
        call("POST", "/v1/sandboxes", R"({"template":"minimal","metadata":{"owner":"ci"}})");
    ASSERT_EQ(created.status, 201) << created.body;
    auto sbx = json::parse(created.body);
    std::string id = sbx["id"];
    EXPECT_EQ(sbx["state"], "running");
    EXPECT_EQ(sbx["metadata"]["owner"], "ci");

    auto got = call("GET", "/v1/sandboxes/" + id);
    EXPECT_EQ(got.status, 200);
    auto list = json::parse(call("GET", "/v1/sandboxes").body);
    ASSERT_EQ(list["sandboxes"].size(), 1u);
    EXPECT_EQ(json::parse(call("GET", "/v1/sandboxes", "", otherKey).body)["sandboxes"].size(), 0u);
    EXPECT_EQ(call("GET", "/v1/sandboxes/" + id, "", otherKey).status, 404);

    auto ran = call("POST", "/v1/sandboxes/" + id + "/exec",
                    R"({"shell":"echo hi; exit 4","user":"root"})");
    ASSERT_EQ(ran.status, 200) << ran.body;
    auto res = json::parse(ran.body);
    EXPECT_EQ(res["exit_code"], 4);
    EXPECT_EQ(res["stdout"], "hi\n");
    EXPECT_TRUE(res.contains("duration_ms"));
    EXPECT_EQ(call("POST", "/v1/sandboxes/" + id + "/exec", R"({"cmd":"ls"})").status, 400);

    EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + id).status, 204);
    EXPECT_EQ(call("GET", "/v1/sandboxes/" + id).status, 404);
    EXPECT_EQ(call("POST", "/v1/sandboxes/" + id + "/exec", R"({"cmd":["true"]})").status, 404);
}

TEST_F(RouterTest, NetworkAllowlistRoute) {
    auto created = call("POST", "/v1/sandboxes", R"({"template":"minimal"})");
    ASSERT_EQ(created.status, 201) << created.body;
    std::string id = json::parse(created.body)["id"];
    EXPECT_EQ(json::parse(created.body)["network"], json({{"allow", json::array()}}));
    auto put = call("PUT", "/v1/sandboxes/" + id + "/network", R"({"allow":[]})");
    EXPECT_EQ(put.status, 200) << put.body;
    EXPECT_EQ(json::parse(put.body)["network"]["allow"], json::array());
    // This fixture's controller has no egress proxy: an allowlist cannot be served.
    EXPECT_EQ(
        call("PUT", "/v1/sandboxes/" + id + "/network", R"({"allow":["example.com"]})").status,
        400);
    EXPECT_EQ(call("PUT", "/v1/sandboxes/" + id + "/network", R"({"allow":["bad host"]})").status,
              400);
    EXPECT_EQ(call("PUT", "/v1/sandboxes/" + id + "/network", R"({"deny":[]})").status, 400);
    EXPECT_EQ(call("PUT", "/v1/sandboxes/" + id + "/network", R"({"allow":[]})", otherKey).status,
              404);
    EXPECT_EQ(call("POST", "/v1/sandboxes/" + id + "/network", R"({"allow":[]})").status, 405);
}

TEST_F(RouterTest, AgentTimeoutIs504) {
    failConnect = true;
    auto r = call("POST", "/v1/sandboxes", R"({"template":"minimal"})");
    EXPECT_EQ(r.status, 504);
    EXPECT_EQ(errorCode(r), "agent_timeout");
}

TEST(SplitPath, IgnoresRepeatedSlashes) {
    EXPECT_EQ(splitPath("//v1///sandboxes/x/"), (std::vector<std::string>{"v1", "sandboxes", "x"}));
    EXPECT_TRUE(splitPath("/").empty());
}

}  // namespace
}  // namespace airlock::api

namespace airlock::api {
namespace {

class RouterLimitTest : public test::ControllerFixture {
  protected:
    RouterLimitTest() : keys(*db), auth(keys), router(controller->frontDoorServices(), auth, keys, "test", 2) {
        key = keys.create("t1", Role::agent, "test").key;
        otherKey = keys.create("t2", Role::agent, "other").key;
    }
    ApiRequest request(const std::string& method, const std::string& path, const std::string& k,
                       const std::string& body = {}) {
        ApiRequest r;
        r.method = method;
        r.path = path;
        r.body = body;
        r.authorization = "Bearer " + k;
        return r;
    }
    ApiKeyStore keys;
    Authenticator auth;
    Router router;
    std::string key, otherKey;
};

TEST_F(RouterLimitTest, ATenantAtItsLimitGets429ButMayStillDeleteAndOthersGoOn) {
    auto s = controller->create("t1", CreateSandboxRequest{});
    // Two long execs hold both of t1's slots until they answer.
    std::mutex mutex;
    std::condition_variable cv;
    int answered = 0;
    auto body = R"({"cmd":["sleep","2"],"user":"root"})";
    for (int i = 0; i < 2; ++i)
        router.handle(request("POST", "/v1/sandboxes/" + s.id + "/exec", key, body),
                      [&](ApiResponse) {
                          std::lock_guard lock(mutex);
                          ++answered;
                          cv.notify_all();
                      });
    EXPECT_EQ(router.limiter().inUse("t1"), 2u) << "a running exec holds its slot, not a thread";
    auto refused = router.handle(request("GET", "/v1/sandboxes", key));
    EXPECT_EQ(refused.status, 429);
    EXPECT_NE(refused.body.find("too_many_requests"), std::string::npos);
    EXPECT_EQ(router.handle(request("GET", "/v1/sandboxes", otherKey)).status, 200)
        << "another tenant goes on";
    EXPECT_EQ(router.handle(request("DELETE", "/v1/sandboxes/" + s.id, key)).status, 204)
        << "a tenant at its limit can still free its sandboxes";
    std::unique_lock lock(mutex);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return answered == 2; }))
        << "execs of a deleted sandbox never answered";
    lock.unlock();
    // Released as each answer's last holder goes, just after it was sent.
    EXPECT_TRUE(
        test::waitFor([&] { return router.limiter().inUse("t1") == 0; }, std::chrono::seconds(5)));
}

}  // namespace
}  // namespace airlock::api

// The package proxy with real VMs: a real airlockd whose upstreams are the
// host's own npm registry (one small package: the smoke test the issue
// allows) and fixture PyPI and apt registries on 127.0.0.1
// (tests/fixtures/package-registry.py). One debian sandbox serves the tests.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/ApiClient.hpp"
#include "support/BuildPaths.hpp"
#include "support/DaemonProcess.hpp"
#include "support/HelperProcess.hpp"
#include "support/TestEnv.hpp"

extern char** environ;

namespace airlock {
namespace {
using nlohmann::json;
using namespace std::chrono_literals;

class Packages : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        world = new World();
        World& w = *world;
        // The host's npm registry, as scripts/run derives it.
        w.npmUpstream = test::hostNpmUpstream();
        ASSERT_FALSE(w.npmUpstream.empty()) << "the host has no npm registry configured";
        w.npmHost = w.npmUpstream.substr(w.npmUpstream.find("://") + 3);
        w.npmHost = w.npmHost.substr(0, w.npmHost.find_first_of(":/"));
        int npmPort = test::freePort(), pypiPort = test::freePort();
        w.aptPort = test::freePort();
        std::string script =
            test::sourceDir() + "/tests/fixtures/package-registry.py";
        w.registry = test::HelperProcess({"python3", script, "--npm-port", std::to_string(npmPort),
                                          "--pypi-port", std::to_string(pypiPort), "--apt-port",
                                          std::to_string(w.aptPort)});
        ASSERT_TRUE(test::waitFor(
            [&] { return test::loopbackPortOpen(w.aptPort) && test::loopbackPortOpen(pypiPort); },
            20s));
        w.dataDir = w.tmp.path() + "/data";
        w.daemon = std::make_unique<test::Daemon>(
            w.dataDir, test::freePort(),
            std::vector<std::string>{
                "--package-upstream", w.npmUpstream, "--package-upstream",
                "pypi=http://127.0.0.1:" + std::to_string(pypiPort) + "/simple/",
                "--package-upstream",
                "apt=http://127.0.0.1:" + std::to_string(w.aptPort) + "/fixture",
                "--egress-allow-cidr", "0.0.0.0/0"});
        std::ifstream keyFile(w.dataDir + "/admin.key");
        std::getline(keyFile, w.key);
        // The registry's own host on the allowlist: egress must still refuse it.
        auto r = api("POST", "/v1/sandboxes",
                     json{{"template", "debian"},
                          {"network", {{"allow", {w.npmHost}}}},
                          {"policy", {{"allow", {"npm install *", "apt-get *"}}}}}
                         .dump());
        ASSERT_EQ(r.status, 201) << r.body;
        w.id = json::parse(r.body)["id"];
    }
    static void TearDownTestSuite() {
        World& w = *world;
        test::ApiClient admin(w.daemon->url(), w.key);
        EXPECT_EQ(w.daemon->shutDown(::testing::UnitTest::GetInstance()->failed_test_count() > 0,
                                     {&admin}),
                  "")
            << "airlockd died during the tests";
        w.daemon.reset();
        delete world;  // the registry stops with it
        world = nullptr;
    }

    struct World {
        test::TempDir tmp;
        std::string npmUpstream, npmHost, dataDir, key, id;
        int aptPort = 0;
        test::HelperProcess registry;
        std::unique_ptr<test::Daemon> daemon;
    };
    static World* world;

    static cli::HttpResult api(const std::string& method, const std::string& path,
                               const std::string& body = {}) {
        test::ApiClient c(world->daemon->url(), world->key);
        return c.request(method, path, body);
    }
    static json exec(const std::string& script, const std::string& user = "user") {
        auto r =
            api("POST", "/v1/sandboxes/" + world->id + "/exec",
                json{{"cmd", {"sh", "-c", script}}, {"user", user}, {"timeout_s", 300}}.dump());
        EXPECT_EQ(r.status, 200) << r.body;
        auto j = json::parse(r.body, nullptr, false);
        return j.is_object() ? j : json::object();
    }
    static json records(const std::string& query) {
        auto r = api("GET", "/v1/sandboxes/" + world->id + "/packages" + query);
        EXPECT_EQ(r.status, 200) << r.body;
        return json::parse(r.body, nullptr, false)["packages"];
    }
};
Packages::World* Packages::world = nullptr;

TEST_F(Packages, NpmInstallsOneSmallPackageFromTheHostsRegistryThroughTheProxy) {
    auto j = exec(
        "mkdir -p /tmp/p && cd /tmp/p && npm init -y >/dev/null && "
        "npm install is-number@7.0.0 --no-audit --no-fund 2>&1 && "
        "node -p 'require(\"is-number/package.json\").version'");
    EXPECT_EQ(j.value("exit_code", -1), 0) << j.dump();
    std::string out = j.value("stdout", "");
    EXPECT_NE(out.find("7.0.0\n"), std::string::npos) << out;
    auto recs = records("?ecosystem=npm&decision=allow");
    bool artifact = false;
    for (const auto& r : recs)
        if (r.value("type", "") == "package.artifact" && r.value("name", "") == "is-number" &&
            r.value("version", "") == "7.0.0") {
            artifact = true;
            EXPECT_EQ(r.value("sha512", "").size(), 128u) << r.dump();
            EXPECT_NE(r.value("command", "").find("npm install is-number@7.0.0"), std::string::npos)
                << r.dump();
            EXPECT_EQ(r.value("upstream", "").rfind(world->npmUpstream.substr(4), 0), 0u)
                << r.dump();
        }
    EXPECT_TRUE(artifact) << recs.dump();
}

TEST_F(Packages, EgressRefusesTheRegistryHostEvenWhenAllowlisted) {
    // A CONNECT refused: curl reports the proxy's answer as http_connect.
    auto j = exec("curl -s -o /dev/null -w '%{http_connect}' https://" + world->npmHost +
                  "/ 2>&1; echo");
    EXPECT_NE(j.value("stdout", "").find("403"), std::string::npos) << j.dump();
    auto audit = api("GET", "/v1/sandboxes/" + world->id + "/audit?type=egress.denied");
    EXPECT_NE(audit.body.find("is a package registry"), std::string::npos) << audit.body;
}

TEST_F(Packages, AptInstallIsHeldForApprovalThenGoesThrough) {
    std::string update =
        "echo 'deb [trusted=yes] http://127.0.0.1:3142/fixture ./' > "
        "/etc/apt/sources.list.d/fixture.list && "
        "apt-get update -o Dir::Etc::sourcelist=/etc/apt/sources.list.d/fixture.list "
        "-o Dir::Etc::sourceparts=- 2>&1";
    auto u = exec(update, "root");
    EXPECT_EQ(u.value("exit_code", -1), 0) << u.dump();
    std::string install =
        "apt-get install -y airlock-fixture-hello 2>&1; cat /usr/share/airlock-fixture-hello/hello";
    auto held = exec(install, "root");
    std::string out = held.value("stdout", "");
    EXPECT_NE(out.find("403"), std::string::npos) << out;
    EXPECT_EQ(out.find("hello from apt"), std::string::npos) << out;
    auto pending = records("?ecosystem=apt&decision=approve");
    ASSERT_FALSE(pending.empty()) << records("").dump();
    std::string approval = pending.back().value("approval_id", "");
    ASSERT_EQ(approval.rfind("apr-", 0), 0u) << pending.dump();
    EXPECT_NE(out.find(approval), std::string::npos) << "apt prints the approval id";
    auto listed = api("GET", "/v1/approvals");
    EXPECT_NE(listed.body.find(approval), std::string::npos) << listed.body;
    auto decided =
        api("POST", "/v1/approvals/" + approval, R"({"decision":"approve","reason":"e2e"})");
    ASSERT_EQ(decided.status, 200) << decided.body;
    auto again = exec(install, "root");
    EXPECT_NE(again.value("stdout", "").find("hello from apt"), std::string::npos) << again.dump();
}

}  // namespace
}  // namespace airlock

// Repository workspaces end to end: a real airlockd, real VMs, and a real
// smart-HTTP git server on 127.0.0.1 (git http-backend behind Basic auth)
// serving a repository with a submodule, a binary file, an ignored
// directory and a second branch. The server's password is a canary that
// no response, log or file of the daemon may ever contain.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/CliApp.hpp"
#include "support/ApiClient.hpp"
#include "support/DaemonProcess.hpp"
#include "support/GitServer.hpp"
#include "support/TestEnv.hpp"

extern char** environ;

namespace airlock {
namespace {
using nlohmann::json;
using namespace std::chrono_literals;

class Workspaces : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        world = new World();
        World& w = *world;
        w.canary = "e2e-Canary-" + std::to_string(::getpid()) + "-pw";
        // --redirect-to: /redirect/... answers with a redirect to another host.
        w.git = std::make_unique<test::GitServer>(test::GitServer::Options{
            "127.0.0.1", w.canary, "",
            {"--redirect-to", "http://localhost:" + std::to_string(test::freePort())}});
        ASSERT_TRUE(w.git->up) << "the git server did not start";
        w.repos = w.git->repos;
        w.gitPort = w.git->port;
        w.authLog = w.git->authLog;
        w.mainCommit = w.git->revParse("demo.git", "main");
        w.featureCommit = w.git->revParse("demo.git", "feature");
        ASSERT_EQ(w.mainCommit.size(), 40u);
        ASSERT_EQ(w.featureCommit.size(), 40u);
        std::string port = std::to_string(w.gitPort);
        w.repo = "http://127.0.0.1:" + port + "/demo.git";
        w.dataDir = w.tmp.path() + "/data";
        w.daemon = std::make_unique<test::Daemon>(
            w.dataDir, test::freePort(),
            std::vector<std::string>{"--egress-allow-cidr", "127.0.0.1/32", "--git-fetch-max-mib",
                                     "8"});
        std::ifstream keyFile(w.dataDir + "/admin.key");
        std::getline(keyFile, w.key);
        auto r = api("POST", "/v1/credentials",
                     json{{"name", "fx"},
                          {"kind", "https-basic"},
                          {"host", "127.0.0.1:" + port},
                          {"username", "git"},
                          {"secret", w.canary}}
                         .dump());
        ASSERT_EQ(r.status, 201) << r.body;
    }
    static void TearDownTestSuite() {
        World& w = *world;
        // The canary is nowhere: not in a response, the log or any file.
        for (const auto& body : w.bodies)
            EXPECT_EQ(body.find(w.canary), std::string::npos) << body.substr(0, 300);
        EXPECT_EQ(test::commandLine("grep -rlF --binary-files=text -- '" + w.canary + "' '" +
                                    w.dataDir + "' '" + w.daemon->logPath() + "' 2>/dev/null"),
                  "");
        EXPECT_EQ(w.daemon->shutDown(::testing::UnitTest::GetInstance()->failed_test_count() > 0),
                  "")
            << "airlockd died during the tests";
        w.daemon.reset();
        delete world;  // the git server stops with it
        world = nullptr;
    }

    struct World {
        test::TempDir tmp;
        std::string canary, repos, repo, mainCommit, featureCommit, dataDir, key, authLog;
        int gitPort = 0;
        std::unique_ptr<test::GitServer> git;
        std::unique_ptr<test::Daemon> daemon;
        std::vector<std::string> bodies;
        // The canary as a pattern that does not contain it: what the guest
        // is asked to look for must not plant it in the guest's memory
        // (a snapshot of which lands in the data dir).
        std::string pattern() const {
            return canary.substr(0, canary.size() - 1) + "[" + canary.back() + "]";
        }
    };
    static World* world;

    static cli::HttpResult api(const std::string& method, const std::string& path,
                               const std::string& body = {}) {
        test::ApiClient c(world->daemon->url(), world->key);
        auto r = c.request(method, path, body);
        world->bodies.push_back(r.body);
        return r;
    }
    static json exec(const std::string& id, const std::string& script) {
        auto r = api("POST", "/v1/sandboxes/" + id + "/exec",
                     json{{"cmd", {"sh", "-c", script}}}.dump());
        EXPECT_EQ(r.status, 200) << r.body;
        auto j = json::parse(r.body, nullptr, false);
        return j.is_object() ? j : json::object();
    }
    static std::string out(const std::string& id, const std::string& script) {
        auto j = exec(id, script);
        std::string s = j.value("stdout", "");
        while (!s.empty() && s.back() == '\n') s.pop_back();
        return s;
    }
    static bool has(const std::vector<std::string>& v, const std::string& x) {
        return std::find(v.begin(), v.end(), x) != v.end();
    }
    static std::string remoteBranch(const std::string& branch) {
        return test::commandLine("git --git-dir=" + world->repos +
                                 "/demo.git rev-parse -q --verify refs/heads/" + branch +
                                 " 2>/dev/null");
    }
    // Waits until the push leaves the states before its outcome.
    static json settledPush(const std::string& id, const std::string& push) {
        json state;
        test::waitFor(
            [&] {
                state = json::parse(
                    api("GET", "/v1/sandboxes/" + id + "/workspace/pushes/" + push).body, nullptr,
                    false);
                std::string s = state.is_object() ? state.value("state", "") : "";
                return s != "pending_approval" && s != "pushing";
            },
            60s, 200ms);
        return state;
    }
    static json requestPush(const std::string& id, const std::string& commit) {
        auto r =
            api("POST", "/v1/sandboxes/" + id + "/workspace/push", json{{"commit", commit}}.dump());
        EXPECT_EQ(r.status, 202) << r.body;
        return json::parse(r.body, nullptr, false);
    }
    static void decide(const json& push, const std::string& decision) {
        auto r = api("POST", "/v1/approvals/" + push.value("approval_id", ""),
                     json{{"decision", decision}, {"reason", "e2e"}}.dump());
        EXPECT_EQ(r.status, 200) << r.body;
    }
};
Workspaces::World* Workspaces::world = nullptr;

TEST_F(Workspaces, ByCommitOnATemplateWithoutGitWithItsWriteScopeEnforced) {
    auto r = api("POST", "/v1/sandboxes",
                 json{{"template", "minimal"},
                      {"workspace",
                       {{"repo", world->repo},
                        {"commit", world->featureCommit},
                        {"branch", "agent/min"},
                        {"credential", "fx"},
                        {"write_scope", {"src/**"}},
                        {"enforce_scope", true}}}}
                     .dump());
    ASSERT_EQ(r.status, 201) << r.body;
    std::string id = json::parse(r.body)["id"];
    auto ws = json::parse(api("GET", "/v1/sandboxes/" + id + "/workspace").body);
    EXPECT_EQ(ws["base_commit"], world->featureCommit);
    EXPECT_EQ(ws["changed_files"], 0);
    // No git in this guest: the agent wrote the files and the .git.
    EXPECT_EQ(
        out(id, "cat /workspace/FEATURE.md /workspace/.git/HEAD /workspace/vendor/lib/helper.py"),
        "feature work\nref: refs/heads/agent/min\ndef helper(): return 42");
    EXPECT_EQ(out(id, "grep -c '" + world->pattern() +
                          "' /workspace/.git/config; grep -c url /workspace/.git/config"),
              "0\n2");
    // The files API keeps to the scope; commands are caught at commit.
    test::ApiClient c(world->daemon->url(), world->key);
    EXPECT_EQ(c.request("PUT", "/v1/sandboxes/" + id + "/files?path=/workspace/README.md", "x",
                        "application/octet-stream")
                  .status,
              403);
    EXPECT_EQ(c.request("PUT", "/v1/sandboxes/" + id + "/files?path=/workspace/src/../README.md",
                        "x", "application/octet-stream")
                  .status,
              403);
    EXPECT_EQ(c.request("PUT", "/v1/sandboxes/" + id + "/files?path=/workspace/src/new.py",
                        "print(1)\n", "application/octet-stream")
                  .status,
              201);
    exec(id, "echo changed >> /workspace/README.md");
    auto diff = json::parse(api("GET", "/v1/sandboxes/" + id + "/workspace/diff?format=json").body);
    EXPECT_EQ(diff["out_of_scope"], json::array({"README.md"})) << diff.dump();
    auto commit = api("POST", "/v1/sandboxes/" + id + "/workspace/commit",
                      R"({"message":"m","author":{"name":"A","email":"a@example.invalid"}})");
    EXPECT_EQ(commit.status, 409);
    EXPECT_NE(commit.body.find("README.md"), std::string::npos);
    // Reset puts the tree back: the stray file goes, the README is restored;
    // ignored files stay unless asked.
    exec(id, "mkdir -p /workspace/node_modules/x && echo kept > /workspace/node_modules/x/y");
    ASSERT_EQ(api("POST", "/v1/sandboxes/" + id + "/workspace/reset", "{}").status, 200);
    EXPECT_EQ(
        out(id, "test -e /workspace/src/new.py && echo stray; tail -c 20 /workspace/README.md"),
        "fixture repository.");
    EXPECT_EQ(json::parse(api("GET", "/v1/sandboxes/" + id + "/workspace").body)["changed_files"],
              0);
    EXPECT_EQ(out(id, "cat /workspace/node_modules/x/y"), "kept");
    // A rule that matches tracked files does not make them deleted: git
    // ignores untracked files only.
    exec(id, "echo 'dist/' >> /workspace/.gitignore");
    auto ignoring =
        json::parse(api("GET", "/v1/sandboxes/" + id + "/workspace/diff?format=json").body);
    ASSERT_EQ(ignoring["files"].size(), 1u) << ignoring.dump();
    EXPECT_EQ(ignoring["files"][0]["path"], ".gitignore");
    EXPECT_EQ(ignoring["files"][0]["status"], "modified");
    ASSERT_EQ(
        api("POST", "/v1/sandboxes/" + id + "/workspace/reset", R"({"clean_ignored":true})").status,
        200);
    EXPECT_EQ(out(id,
                  "test -e /workspace/node_modules && echo left; cat /workspace/FEATURE.md; "
                  "head -1 /workspace/dist/bundle.js"),
              "feature work\n/* generated */");
    EXPECT_EQ(
        api("POST", "/v1/sandboxes/" + id + "/workspace/reset", R"({"clean_ignored":1})").status,
        400);
    EXPECT_EQ(api("DELETE", "/v1/sandboxes/" + id).status, 204);
}

TEST_F(Workspaces, RefusalsComeBeforeAnythingBoots) {
    auto create = [&](const json& ws) {
        return api("POST", "/v1/sandboxes", json{{"template", "minimal"}, {"workspace", ws}}.dump())
            .status;
    };
    EXPECT_EQ(create({{"repo", world->repo}, {"branch", "agent/x"}, {"credential", "nope"}}), 404);
    EXPECT_EQ(create({{"repo", world->repo},
                      {"branch", "agent/x"},
                      {"ref", "no-such-ref"},
                      {"credential", "fx"}}),
              422);
    EXPECT_EQ(create({{"repo", world->repo}, {"branch", "agent/x"}}),
              422);  // no credential: 401 from git
    // A wrong secret fails at once, not after a loop of retries.
    ASSERT_EQ(api("POST", "/v1/credentials",
                  json{{"name", "wrong"},
                       {"kind", "https-basic"},
                       {"host", "127.0.0.1:" + std::to_string(world->gitPort)},
                       {"username", "git"},
                       {"secret", "not-the-password"}}
                      .dump())
                  .status,
              201);
    auto started = std::chrono::steady_clock::now();
    EXPECT_EQ(create({{"repo", world->repo}, {"branch", "agent/x"}, {"credential", "wrong"}}), 422);
    EXPECT_LT(std::chrono::steady_clock::now() - started, 20s);
    auto listed = api("GET", "/v1/credentials");
    EXPECT_EQ(listed.body.find("not-the-password"), std::string::npos) << listed.body;
    EXPECT_EQ(api("DELETE", "/v1/credentials/wrong").status, 204);
    EXPECT_EQ(create({{"repo", world->repo}, {"branch", "-bad"}, {"credential", "fx"}}), 400);
    EXPECT_EQ(create({{"repo", "http://git:pw@127.0.0.1:1/x.git"}, {"branch", "agent/x"}}), 400);
    EXPECT_EQ(
        create({{"repo", world->repo}, {"branch", "agent/x"}, {"credential", "fx"}, {"bogus", 1}}),
        400);
    std::string redirect =
        "http://127.0.0.1:" + std::to_string(world->gitPort) + "/redirect/demo.git";
    EXPECT_EQ(create({{"repo", redirect}, {"branch", "agent/x"}, {"credential", "fx"}}), 422);
    EXPECT_EQ(create({{"repo", "http://10.0.0.1/x.git"}, {"branch", "agent/x"}}), 403);
    // A credential for another host is never sent.
    ASSERT_EQ(
        api("POST", "/v1/credentials",
            R"({"name":"elsewhere","kind":"https-token","host":"127.0.0.1:1","secret":"x-e2e-other"})")
            .status,
        201);
    EXPECT_EQ(create({{"repo", world->repo}, {"branch", "agent/x"}, {"credential", "elsewhere"}}),
              403);
    EXPECT_EQ(api("DELETE", "/v1/credentials/elsewhere").status, 204);
    auto list = json::parse(api("GET", "/v1/sandboxes").body)["sandboxes"];
    for (const auto& s : list) EXPECT_NE(s.value("state", ""), "creating");
    EXPECT_TRUE(list.empty()) << "a refused workspace left a sandbox: " << list.dump();
}

TEST_F(Workspaces, PushesWaitForAHumanKeepTheLeaseAndNeverForce) {
    auto r = api("POST", "/v1/sandboxes",
                 json{{"template", "debian"},
                      {"workspace",
                       {{"repo", world->repo},
                        {"ref", "main"},
                        {"branch", "agent/e2e"},
                        {"credential", "fx"}}}}
                     .dump());
    ASSERT_EQ(r.status, 201) << r.body;
    std::string id = json::parse(r.body)["id"];
    // The guest's view: clean, at the base, no credential anywhere.
    EXPECT_EQ(out(id,
                  "cd /workspace && git status --porcelain | wc -l; git log -1 --format=%H; "
                  "git config --get-regexp credential | wc -l; "
                  "(env; cat /proc/[0-9]*/cmdline) 2>/dev/null | grep -c '" +
                      world->pattern() + "'"),
              "0\n" + world->mainCommit + "\n0\n0");
    exec(id, "cd /workspace && printf 'def add(a, b):\\n    return b + a\\n' > src/app.py");
    // The CLI reads the same host-computed diff.
    std::ostringstream cliOut, cliErr;
    EXPECT_EQ(cli::runCli({"diff", id, "--stat"}, world->daemon->url(), world->key, cliOut, cliErr),
              0)
        << cliErr.str();
    EXPECT_NE(cliOut.str().find(" src/app.py | modified +1 -1"), std::string::npos) << cliOut.str();
    EXPECT_NE(cliOut.str().find("1 files changed"), std::string::npos) << cliOut.str();
    auto commit = api(
        "POST", "/v1/sandboxes/" + id + "/workspace/commit",
        R"({"message":"agent: swap","author":{"name":"Agent","email":"agent@example.invalid"}})");
    ASSERT_EQ(commit.status, 201) << commit.body;
    std::string c1 = json::parse(commit.body)["commit"];
    EXPECT_EQ(json::parse(commit.body)["parent"], world->mainCommit);
    // A wiped and re-made .git in the guest changes nothing the host shows.
    std::string tree =
        json::parse(api("GET", "/v1/sandboxes/" + id + "/workspace/diff?format=json").body)["tree"];
    exec(id,
         "cd /workspace && rm -rf .git && git init -q && git add -A && git -c user.name=x -c "
         "user.email=x@x "
         "commit -qm x");
    EXPECT_EQ(
        json::parse(api("GET", "/v1/sandboxes/" + id + "/workspace/diff?format=json").body)["tree"],
        tree);

    // Denied: nothing reaches the remote.
    auto denied = requestPush(id, c1);
    decide(denied, "deny");
    EXPECT_EQ(settledPush(id, denied["push_id"])["state"], "denied");
    EXPECT_EQ(remoteBranch("agent/e2e"), "");
    // The server refuses (a pre-receive hook): rejected, not pushed.
    std::string hook = world->repos + "/demo.git/hooks/pre-receive";
    { std::ofstream(hook) << "#!/bin/sh\necho 'protected by policy' >&2\nexit 1\n"; }
    ::chmod(hook.c_str(), 0755);
    auto refused = requestPush(id, c1);
    decide(refused, "approve");
    auto state = settledPush(id, refused["push_id"]);
    EXPECT_EQ(state["state"], "rejected") << state.dump();
    EXPECT_EQ(remoteBranch("agent/e2e"), "");
    ::unlink(hook.c_str());
    // The branch exists on the remote at a commit ours does not contain:
    // not a fast-forward, so not pushed (and never forced).
    test::commandLine("git --git-dir=" + world->repos +
                      "/demo.git update-ref refs/heads/agent/e2e " + world->featureCommit);
    auto nonFf = requestPush(id, c1);
    decide(nonFf, "approve");
    state = settledPush(id, nonFf["push_id"]);
    EXPECT_EQ(state["state"], "rejected") << state.dump();
    EXPECT_NE(state.value("error", "").find("fast-forward"), std::string::npos) << state.dump();
    EXPECT_EQ(remoteBranch("agent/e2e"), world->featureCommit);
    // The branch moves between the request and the approval: the lease holds.
    test::commandLine("git --git-dir=" + world->repos +
                      "/demo.git update-ref -d refs/heads/agent/e2e");
    auto leased = requestPush(id, c1);
    test::commandLine("git --git-dir=" + world->repos +
                      "/demo.git update-ref refs/heads/agent/e2e " + world->mainCommit);
    decide(leased, "approve");
    state = settledPush(id, leased["push_id"]);
    EXPECT_EQ(state["state"], "rejected") << state.dump();
    EXPECT_EQ(remoteBranch("agent/e2e"), world->mainCommit);
    // With the remote branch at the base, the approved push is a fast-forward.
    auto good = requestPush(id, c1);
    decide(good, "approve");
    EXPECT_EQ(settledPush(id, good["push_id"])["state"], "pushed");
    EXPECT_EQ(remoteBranch("agent/e2e"), c1);
    // Only the last commit, only under the prefix.
    EXPECT_EQ(api("POST", "/v1/sandboxes/" + id + "/workspace/push",
                  json{{"commit", world->mainCommit}}.dump())
                  .status,
              409);

    // A snapshot's clone has the workspace, its head and the guest's edit.
    auto snap = api("POST", "/v1/sandboxes/" + id + "/snapshots", "{}");
    ASSERT_EQ(snap.status, 201) << snap.body;
    auto clone =
        api("POST", "/v1/sandboxes", json{{"snapshot", json::parse(snap.body)["id"]}}.dump());
    ASSERT_EQ(clone.status, 201) << clone.body;
    std::string cloneId = json::parse(clone.body)["id"];
    auto cws = json::parse(api("GET", "/v1/sandboxes/" + cloneId + "/workspace").body);
    EXPECT_EQ(cws["base_commit"], world->mainCommit);
    EXPECT_EQ(cws["head"], c1);
    EXPECT_EQ(cws["changed_files"], 1);
    auto audit = api("GET", "/v1/sandboxes/" + id + "/audit").body;
    for (const char* type :
         {"workspace.cloned", "workspace.committed", "workspace.diffed", "push.requested",
          "push.denied", "push.approved", "push.pushed", "push.rejected"})
        EXPECT_NE(audit.find(type), std::string::npos) << type;
    EXPECT_EQ(api("DELETE", "/v1/sandboxes/" + cloneId).status, 204);
    EXPECT_EQ(api("DELETE", "/v1/sandboxes/" + id).status, 204);
}

// Attack 4: a push approval quoted the latest bundle whatever tree it
// covered, a reset kept the commit that would be pushed, and no route
// showed that commit. Now the approval names one commit (its tree, base,
// diffstat and patch), quotes only evidence of exactly that tree, and a new
// commit or a reset supersedes it: approving it then pushes nothing.
TEST_F(Workspaces, APushApprovalIsBoundToOneCommitAndEndsWithANewCommitOrAReset) {
    const std::string branch = "agent/bound";
    auto r = api("POST", "/v1/sandboxes",
                 json{{"template", "debian"},
                      {"workspace",
                       {{"repo", world->repo},
                        {"ref", "main"},
                        {"branch", branch},
                        {"credential", "fx"}}}}
                     .dump());
    ASSERT_EQ(r.status, 201) << r.body;
    std::string id = json::parse(r.body)["id"];
    auto commitNow = [&](const std::string& message) {
        auto c = api("POST", "/v1/sandboxes/" + id + "/workspace/commit",
                     json{{"message", message},
                          {"author", {{"name", "Agent"}, {"email", "agent@example.invalid"}}}}
                         .dump());
        EXPECT_EQ(c.status, 201) << c.body;
        return json::parse(c.body, nullptr, false).value("commit", std::string());
    };
    auto approval = [&](const std::string& ap) {
        auto got = api("GET", "/v1/approvals/" + ap);
        EXPECT_EQ(got.status, 200) << got.body;
        return json::parse(got.body, nullptr, false);
    };
    // A clean change, sealed, committed: its push quotes that bundle.
    exec(id, "cd /workspace && printf 'def add(a, b):\\n    return int(a) + int(b)\\n' > src/app.py");
    auto sealed = api("POST", "/v1/sandboxes/" + id + "/evidence", "{}");
    ASSERT_EQ(sealed.status, 201) << sealed.body;
    std::string evd1 = json::parse(sealed.body)["id"];
    std::string c1 = commitNow("agent: change 1");
    auto push1 = requestPush(id, c1);
    std::string ap1 = push1.value("approval_id", "");
    auto a1 = approval(ap1);
    EXPECT_EQ(a1["state"], "pending");
    EXPECT_EQ(a1["kind"], "publish");
    EXPECT_EQ(a1["commit"], c1);
    EXPECT_EQ(a1["base"], world->mainCommit);
    EXPECT_EQ(a1["tree"].get<std::string>().size(), 40u);
    ASSERT_EQ(a1["diffstat"]["files"].size(), 1u) << a1.dump();
    EXPECT_EQ(a1["diffstat"]["files"][0]["path"], "src/app.py");
    ASSERT_TRUE(a1["evidence"].is_object()) << a1.dump();
    EXPECT_EQ(a1["evidence"]["id"], evd1) << "the bundle of exactly this tree";
    auto patch = api("GET", "/v1/approvals/" + ap1 + "/patch");
    EXPECT_EQ(patch.status, 200);
    EXPECT_NE(patch.body.find("+    return int(a) + int(b)"), std::string::npos) << patch.body;

    // A bad change committed after the request: the pending approval is
    // superseded; approving it is refused and nothing reaches the remote.
    exec(id, "cd /workspace && printf 'def add(a, b):\\n    return 0\\n' > src/app.py");
    std::string c2 = commitNow("agent: change 2");
    EXPECT_EQ(approval(ap1)["state"], "superseded");
    auto late = api("POST", "/v1/approvals/" + ap1,
                    json{{"decision", "approve"}, {"reason", "e2e: late"}}.dump());
    EXPECT_EQ(late.status, 409) << late.body;
    EXPECT_EQ(settledPush(id, push1["push_id"])["state"], "superseded");
    EXPECT_EQ(remoteBranch(branch), "");
    // Its push names commit 2 and quotes no bundle (none covers its tree).
    auto push2 = requestPush(id, c2);
    std::string ap2 = push2.value("approval_id", "");
    auto a2 = approval(ap2);
    EXPECT_EQ(a2["commit"], c2);
    EXPECT_TRUE(a2["evidence"].is_null()) << a2.dump();
    EXPECT_TRUE(a2["evidence_reason"].is_string());
    auto listed = api("GET", "/v1/approvals");
    EXPECT_EQ(listed.body.find(evd1), std::string::npos) << "never a bundle of another tree";
    EXPECT_NE(listed.body.find(ap2), std::string::npos);

    // A reset supersedes it too, and leaves nothing to push.
    ASSERT_EQ(api("POST", "/v1/sandboxes/" + id + "/workspace/reset", "{}").status, 200);
    EXPECT_EQ(approval(ap2)["state"], "superseded");
    EXPECT_EQ(api("POST", "/v1/approvals/" + ap2, R"({"decision":"approve"})").status, 409);
    EXPECT_TRUE(json::parse(api("GET", "/v1/sandboxes/" + id + "/workspace").body)["head"].is_null());
    EXPECT_EQ(api("POST", "/v1/sandboxes/" + id + "/workspace/push", json{{"commit", c2}}.dump())
                  .status,
              409);
    std::this_thread::sleep_for(2s);
    EXPECT_EQ(remoteBranch(branch), "") << "nothing was pushed";
    auto audit = api("GET", "/v1/sandboxes/" + id + "/audit?type=approval.superseded").body;
    EXPECT_NE(audit.find(ap1), std::string::npos) << audit;
    EXPECT_NE(audit.find(ap2), std::string::npos) << audit;
    EXPECT_EQ(api("DELETE", "/v1/sandboxes/" + id).status, 204);
}

// Issue 29, attack 9: a credential over plain http on IPv6. The daemon
// opened 127.0.0.1/32 only; a repository on http://[::1] with a credential
// is refused before anything reaches it. A daemon that opened ::1/128 sends
// the credential there (the operator's choice, both families alike).
TEST_F(Workspaces, Attack9_ACredentialOverPlainHttpOnIpv6GoesOnlyToRangesTheOperatorOpened) {
    test::GitServer server6(test::GitServer::Options{"::1", world->canary, world->repos, {}});
    ASSERT_TRUE(server6.up) << "the fixture server did not bind ::1";
    std::string host6 = server6.hostPort(), repo6 = server6.url("demo.git");
    auto cred = json{{"name", "v6"},
                     {"kind", "https-basic"},
                     {"host", host6},
                     {"username", "git"},
                     {"secret", world->canary}}
                    .dump();
    ASSERT_EQ(api("POST", "/v1/credentials", cred).status, 201);
    auto before = server6.requests("/demo.git").size();
    auto r =
        api("POST", "/v1/sandboxes",
            json{{"template", "minimal"},
                 {"workspace", {{"repo", repo6}, {"branch", "agent/v6"}, {"credential", "v6"}}}}
                .dump());
    EXPECT_EQ(r.status, 403) << r.body;
    EXPECT_EQ(server6.requests("/demo.git").size(), before) << "a request reached [::1]";
    EXPECT_TRUE(json::parse(api("GET", "/v1/sandboxes").body)["sandboxes"].empty());
    EXPECT_EQ(api("DELETE", "/v1/credentials/v6").status, 204);

    // ::1 opened by the operator: the credential goes (the fetch succeeds;
    // the unknown ref then stops the create before anything boots).
    test::TempDir dir;
    test::Daemon opened(dir.path() + "/data", test::freePort(), {"--egress-allow-cidr", "::1/128"});
    std::string key;
    std::ifstream(dir.path() + "/data/admin.key") >> key;
    test::ApiClient c(opened.url(), key);
    ASSERT_EQ(c.request("POST", "/v1/credentials", cred).status, 201);
    auto fetched = c.request("POST", "/v1/sandboxes",
                             json{{"template", "minimal"},
                                  {"workspace",
                                   {{"repo", repo6},
                                    {"ref", "no-such-ref"},
                                    {"branch", "agent/v6"},
                                    {"credential", "v6"}}}}
                                 .dump());
    EXPECT_EQ(fetched.status, 422) << fetched.body;
    EXPECT_NE(fetched.body.find("no-such-ref"), std::string::npos) << fetched.body;
    EXPECT_TRUE(has(server6.requests("/demo.git"), "AUTH"));
    EXPECT_EQ(fetched.body.find(world->canary), std::string::npos);
}

// Issue 29, attack 10: team/hostile.git's .gitmodules names
// ../../private.git (another owner's repository on the same host, which
// the tenant's credential can read) and ../notes.git (its neighbour). The
// credential goes to hostile.git and its neighbour only; private.git is
// tried without it, refused, and skipped with a warning the record shows.
TEST_F(Workspaces, Attack10_AHostileGitmodulesDoesNotGetTheCredentialForAnotherRepository) {
    std::string hostile = "http://127.0.0.1:" + std::to_string(world->gitPort) + "/team/hostile.git";
    auto r = api(
        "POST", "/v1/sandboxes",
        json{{"template", "minimal"},
             {"workspace", {{"repo", hostile}, {"branch", "agent/hostile"}, {"credential", "fx"}}}}
            .dump());
    ASSERT_EQ(r.status, 201) << r.body;
    std::string id = json::parse(r.body)["id"];
    EXPECT_TRUE(has(world->git->requests("/team/hostile.git"), "AUTH"));
    EXPECT_TRUE(has(world->git->requests("/team/notes.git"), "AUTH"))
        << "without a scope the credential goes to the repository's neighbours";
    auto priv = world->git->requests("/private.git");
    EXPECT_FALSE(priv.empty()) << "the submodule was not even tried anonymously";
    EXPECT_FALSE(has(priv, "AUTH")) << "the credential reached private.git";
    auto ws = json::parse(api("GET", "/v1/sandboxes/" + id + "/workspace").body);
    ASSERT_TRUE(ws.contains("warnings")) << ws.dump();
    EXPECT_NE(ws["warnings"].dump().find("vendor/stolen"), std::string::npos) << ws.dump();
    ASSERT_EQ(ws["skipped_submodules"].size(), 1u) << ws.dump();
    EXPECT_EQ(ws["skipped_submodules"][0]["path"], "vendor/stolen");
    EXPECT_EQ(ws["submodules"].size(), 1u) << ws.dump();
    EXPECT_EQ(ws["changed_files"], 0) << "the skipped submodule's gitlink stays as it was";
    EXPECT_EQ(out(id, "grep -rl private-Bytes /workspace 2>/dev/null | wc -l"), "0");
    EXPECT_EQ(out(id, "cat /workspace/vendor/notes/NOTES.txt"), "notes-of-the-same-team");
    auto audit = api("GET", "/v1/sandboxes/" + id + "/audit").body;
    EXPECT_NE(audit.find("skipped_submodules"), std::string::npos) << "the audit records the skip";
    EXPECT_EQ(api("DELETE", "/v1/sandboxes/" + id).status, 204);
    // A credential whose scope holds the other repository may go there.
    ASSERT_EQ(api("POST", "/v1/credentials",
                  json{{"name", "wide"},
                       {"kind", "https-basic"},
                       {"host", "127.0.0.1:" + std::to_string(world->gitPort)},
                       {"username", "git"},
                       {"secret", world->canary},
                       {"scope", {"/private.git", "/team/hostile.git"}}}
                      .dump())
                  .status,
              201);
    auto listed = json::parse(api("GET", "/v1/credentials").body);
    bool scoped = false;
    for (const auto& c : listed["credentials"])
        if (c["name"] == "wide")
            scoped = c["scope"] == json::array({"/private.git", "/team/hostile.git"});
    EXPECT_TRUE(scoped) << listed.dump();
    // ...and a scoped credential is refused for a repository outside its scope.
    EXPECT_EQ(api("POST", "/v1/sandboxes",
                  json{{"template", "minimal"},
                       {"workspace",
                        {{"repo", world->repo}, {"branch", "agent/x"}, {"credential", "wide"}}}}
                      .dump())
                  .status,
              403);
    EXPECT_EQ(
        api("POST", "/v1/credentials",
            R"({"name":"dots","kind":"https-token","host":"h","secret":"x-e2e-dots","scope":["/org/../"]})")
            .status,
        400);
    EXPECT_EQ(api("DELETE", "/v1/credentials/wide").status, 204);
}

// Issue 29, attack 5: a remote that streams a pack without end. The suite's
// daemon caps a fetch at 8 MiB (--git-fetch-max-mib 8): the create answers
// 413 naming the cap, soon, and nothing of the pack stays on the host.
TEST_F(Workspaces, Attack5_AnEndlessPackStopsAtTheCapAndLeavesNothingOnDisk) {
    std::string endless =
        "http://127.0.0.1:" + std::to_string(world->gitPort) + "/endless/demo.git";
    auto started = std::chrono::steady_clock::now();
    auto r =
        api("POST", "/v1/sandboxes",
            json{{"template", "minimal"},
                 {"workspace", {{"repo", endless}, {"branch", "agent/big"}, {"credential", "fx"}}}}
                .dump());
    EXPECT_EQ(r.status, 413) << r.body;
    EXPECT_NE(r.body.find("8 MiB"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("--git-fetch-max-mib"), std::string::npos) << r.body;
    EXPECT_LT(std::chrono::steady_clock::now() - started, 90s);
    EXPECT_EQ(
        test::commandLine("find '" + world->dataDir +
                          "/git' -type f \\( -name 'pack_git2*' -o -name 'tmp_*' -o -size +4M \\) "
                          "2>/dev/null"),
        "");
    EXPECT_TRUE(json::parse(api("GET", "/v1/sandboxes").body)["sandboxes"].empty());
}

}  // namespace
}  // namespace airlock

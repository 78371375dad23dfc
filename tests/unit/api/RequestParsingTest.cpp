#include <gtest/gtest.h>

#include "api/RequestParsing.hpp"
#include "core/Error.hpp"
#include "support/TestEnv.hpp"

namespace airlock::api {
namespace {

using test::codeOf;

TEST(RequestParsing, CreateSandboxDefaultsAndFields) {
    auto r = parseCreateSandbox(
        R"({"template":"minimal","vcpus":2,"memory_mib":512,"metadata":{"k":"v"},"env":{"A":"1"}})");
    EXPECT_EQ(r.templateName, "minimal");
    EXPECT_EQ(*r.vcpus, 2u);
    EXPECT_EQ(*r.memoryMib, 512u);
    EXPECT_EQ(r.metadata.at("k"), "v");
    EXPECT_EQ(r.env.at("A"), "1");
    EXPECT_EQ(parseCreateSandbox("{}").templateName, "minimal");
    EXPECT_FALSE(parseCreateSandbox("{}").diskGib);
    EXPECT_EQ(*parseCreateSandbox(R"({"template":"debian","disk_gib":20})").diskGib, 20u);
}

TEST(RequestParsing, CreateSandboxReadsBootAndTimeoutActionAsEnums) {
    auto defaults = parseCreateSandbox("{}");
    EXPECT_EQ(defaults.boot, BootMode::automatic);
    EXPECT_EQ(defaults.onTimeout, TimeoutAction::kill);
    EXPECT_EQ(defaults.portAccess, PortAccess::exposed);
    EXPECT_EQ(parseCreateSandbox(R"({"boot":"cold"})").boot, BootMode::cold);
    EXPECT_EQ(parseCreateSandbox(R"({"boot":"warm"})").boot, BootMode::warm);
    EXPECT_EQ(parseCreateSandbox(R"({"boot":"auto"})").boot, BootMode::automatic);
    EXPECT_EQ(parseCreateSandbox(R"({"on_timeout":"pause"})").onTimeout, TimeoutAction::pause);
    for (const char* bad : {R"({"boot":"hot"})", R"({"boot":"Cold"})", R"({"boot":""})",
                            R"({"on_timeout":"explode"})", R"({"on_timeout":"kill "})"}) {
        EXPECT_EQ(codeOf([&] { parseCreateSandbox(bad); }), ErrorCode::bad_request) << bad;
    }
    try {
        parseCreateSandbox(R"({"boot":"hot"})");
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "boot must be 'auto', 'cold' or 'warm'");
    }
    // Each name reads back as itself: the record and the E2B door store names.
    for (auto m : {BootMode::automatic, BootMode::cold, BootMode::warm})
        EXPECT_EQ(bootModeFrom(bootModeName(m)), m);
    EXPECT_EQ(parseCreateSandbox(R"({"on_timeout":"pause_disk_only"})").onTimeout,
              TimeoutAction::pause_disk_only);
    for (auto a : {TimeoutAction::kill, TimeoutAction::pause, TimeoutAction::pause_disk_only})
        EXPECT_EQ(timeoutActionFrom(timeoutActionName(a)), a);
    for (auto p : {PortAccess::exposed, PortAccess::open, PortAccess::token})
        EXPECT_EQ(portAccessFrom(portAccessName(p)), p);
    EXPECT_EQ(portAccessName(PortAccess::open), "public");
    EXPECT_EQ(codeOf([&] { portAccessFrom("everyone"); }), ErrorCode::bad_request);
}

TEST(RequestParsing, APauseKeepsMemoryUnlessTheBodySaysNot) {
    EXPECT_EQ(parsePause(""), PauseKind::memory);
    EXPECT_EQ(parsePause("{}"), PauseKind::memory);
    EXPECT_EQ(parsePause(R"({"memory":true})"), PauseKind::memory);
    EXPECT_EQ(parsePause(R"({"memory":false})"), PauseKind::disk_only);
    for (const char* bad : {R"({"memory":"no"})", R"({"memory":0})", R"({"keep":false})", "[]",
                            "{"})
        EXPECT_EQ(codeOf([&] { parsePause(bad); }), ErrorCode::bad_request) << bad;
}

TEST(RequestParsing, SandboxJsonStatesItsDiskGib) {
    SandboxRecord r;
    r.id = "sbx-a";
    EXPECT_TRUE(sandboxJson(r)["disk_gib"].is_null()) << "no disk";
    r.diskBytes = 7ull << 30;
    EXPECT_EQ(sandboxJson(r)["disk_gib"], 7);
}

TEST(RequestParsing, CreateSandboxRejectsBadInput) {
    for (const char* bad :
         {R"({"template": "minimal",)", R"({"template":"minimal","bogus_field":1})", R"([])",
          R"({"template":7})", R"({"template":""})", R"({"vcpus":"2"})", R"({"vcpus":0})",
          R"({"vcpus":2.5})", R"({"metadata":{"k":1}})", R"({"env":{"1BAD":"x"}})",
          R"({"env":{"A B":"x"}})", R"({"env":["A"]})", R"({"disk_gib":"8"})", R"({"disk_gib":0})",
          R"({"disk_gib":-1})", R"({"disk_gib":1.5})"}) {
        EXPECT_EQ(codeOf([&] { parseCreateSandbox(bad); }), ErrorCode::bad_request) << bad;
    }
}

TEST(RequestParsing, NetworkAllowlist) {
    auto r = parseCreateSandbox(
        R"({"network":{"allow":["pkgs.example.org","*.mirror.example.net","registry.local:5000"]}})");
    EXPECT_EQ(r.networkAllow, (std::vector<std::string>{"pkgs.example.org", "*.mirror.example.net",
                                                        "registry.local:5000"}));
    EXPECT_TRUE(parseCreateSandbox(R"({"network":{"allow":[]}})").networkAllow.empty());
    EXPECT_EQ(parseNetworkUpdate(R"({"allow":["example.com"]})"),
              std::vector<std::string>{"example.com"});
    for (const char* bad :
         {R"({"network":[]})", R"({"network":{}})", R"({"network":{"allow":"example.com"}})",
          R"({"network":{"allow":[1]}})", R"({"network":{"allow":["*"]}})",
          R"({"network":{"allow":["a b"]}})", R"({"network":{"allow":[],"deny":[]}})"})
        EXPECT_EQ(codeOf([&] { parseCreateSandbox(bad); }), ErrorCode::bad_request) << bad;
    for (const char* bad :
         {"", "[]", R"({"allow":["ok.com"],"x":1})", R"({"allow":["10.0.0.0/8"]})"})
        EXPECT_EQ(codeOf([&] { parseNetworkUpdate(bad); }), ErrorCode::bad_request) << bad;
}

TEST(RequestParsing, ExecCmdOrShell) {
    auto a =
        parseExec(R"({"cmd":["ls","-l"],"cwd":"/tmp","timeout_s":5,"stdin":"x","env":{"A":"b"}})");
    EXPECT_EQ(a.argv, (std::vector<std::string>{"ls", "-l"}));
    EXPECT_EQ(a.cwd, "/tmp");
    EXPECT_EQ(a.timeoutS, 5u);
    EXPECT_EQ(a.stdinData, "x");
    auto b = parseExec(R"({"shell":"echo hi | wc -c"})");
    ASSERT_TRUE(b.shell);
    auto req = toAgentRequest(b, {});
    EXPECT_EQ(req.argv, (std::vector<std::string>{"/bin/sh", "-c", "echo hi | wc -c"}));
    EXPECT_EQ(req.user, "user");
    EXPECT_EQ(req.timeout_ms, 60000u);
}

TEST(RequestParsing, ExecRejectsBadInput) {
    for (const char* bad :
         {R"({})", R"({"cmd":["a"],"shell":"b"})", R"({"cmd":[]})", R"({"cmd":"ls"})",
          R"({"cmd":[1]})", R"({"cmd":[""]})", R"({"shell":""})", R"({"cmd":["a"],"cwd":"rel"})",
          R"({"cmd":["a"],"timeout_s":0})", R"({"cmd":["a"],"timeout_s":-1})",
          R"({"cmd":["a"],"user":"admin"})", R"({"cmd":["a"],"extra":true})"}) {
        EXPECT_EQ(codeOf([&] { parseExec(bad); }), ErrorCode::bad_request) << bad;
    }
}

TEST(RequestParsing, ExecOutputJson) {
    ExecOutput out;
    out.result.exit_code = 3;
    out.stdoutData = "o";
    out.stderrData = "e";
    out.durationMs = 12;
    auto j = execOutputJson(out);
    EXPECT_EQ(j["exit_code"], 3);
    EXPECT_EQ(j["stdout"], "o");
    EXPECT_EQ(j["stderr"], "e");
    EXPECT_EQ(j["duration_ms"], 12);
    EXPECT_EQ(j["truncated"], false);
}

}  // namespace
}  // namespace airlock::api

namespace airlock::api {
namespace {

TEST(RequestParsing, TaskContextAndArtifactGlobs) {
    auto r = parseCreateSandbox(R"({"task":{"id":"task-123","prompt":"Fix it","requested_by":"ana",
        "test_commands":["npm test"],"sensitive_paths":["auth/**",".github/**"]},
        "artifacts":["reports/**/*.xml","screenshots/*.png"]})");
    ASSERT_TRUE(r.task);
    EXPECT_EQ(r.task->id, "task-123");
    EXPECT_EQ(r.task->testCommands.at(0), "npm test");
    EXPECT_EQ(r.task->sensitivePaths.size(), 2u);
    EXPECT_EQ(r.artifacts.size(), 2u);
    EXPECT_TRUE(parseCreateSandbox(R"({"task":{}})").task->testCommands.empty());
    for (const char* bad : {
             R"({"task":"x"})",
             R"({"task":{"goal":"unknown field"}})",
             R"({"task":{"id":"has space"}})",
             R"({"task":{"test_commands":"npm test"}})",
             R"({"task":{"test_commands":[""]}})",
             R"({"task":{"sensitive_paths":["/etc/**"]}})",
             R"({"artifacts":["../outside/*"]})",
             R"({"artifacts":["a/../../b"]})",
             R"({"artifacts":"reports"})",
             R"({"artifacts":[1]})",
         })
        EXPECT_EQ(codeOf([&] { parseCreateSandbox(bad); }), ErrorCode::bad_request) << bad;
    SandboxRecord rec;
    rec.taskJson = R"({"id":"t"})";
    rec.artifacts = {"out/**"};
    EXPECT_EQ(sandboxJson(rec)["task"]["id"], "t");
    EXPECT_EQ(sandboxJson(rec)["artifacts"][0], "out/**");
    EXPECT_TRUE(sandboxJson(SandboxRecord{})["task"].is_null());
}

TEST(RequestParsing, ExecPurposeIsTestOrNothing) {
    EXPECT_EQ(parseExec(R"({"shell":"pytest","purpose":"test"})").purpose, "test");
    EXPECT_EQ(parseExec(R"({"shell":"pytest"})").purpose, "");
    EXPECT_EQ(codeOf([&] { parseExec(R"({"shell":"pytest","purpose":"build"})"); }),
              ErrorCode::bad_request);
    EXPECT_TRUE(matchesTestCommand("npm  test", {"npm test"}));
    EXPECT_TRUE(matchesTestCommand("cd /workspace && npm test", {"npm test"}));
    EXPECT_FALSE(matchesTestCommand("npm test; curl evil", {"npm test"}));
    EXPECT_FALSE(matchesTestCommand("npm install", {"npm test"}));
    EXPECT_FALSE(matchesTestCommand("", {""}));
}

TEST(RequestParsing, AnotherNodesListedSandboxReadsBackAsARecord) {
    SandboxRecord r;
    r.id = "sbx-abc";
    r.templateName = "minimal";
    r.state = SandboxState::paused;
    r.vcpus = 2;
    r.memoryMib = 512;
    r.diskBytes = 3ull << 30;
    r.createdAt = "2026-12-05T10:00:00.000Z";
    r.expiresAt = 1796464800;
    r.metadataJson = R"({"team":"x"})";
    r.tenant = "acme";
    auto back = listedSandboxRecord(sandboxJson(r));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->id, r.id);
    EXPECT_EQ(back->templateName, "minimal");
    EXPECT_EQ(back->state, SandboxState::paused);
    EXPECT_EQ(back->vcpus, 2u);
    EXPECT_EQ(back->memoryMib, 512u);
    EXPECT_EQ(back->diskBytes, 3ull << 30);
    EXPECT_EQ(back->createdAt, r.createdAt);
    EXPECT_EQ(back->expiresAt, r.expiresAt);
    EXPECT_EQ(nlohmann::json::parse(back->metadataJson)["team"], "x");
    // What a node that did not answer is listed as, and what is no sandbox.
    auto unavailable = listedSandboxRecord({{"id", "sbx-x"}, {"state", "unavailable"}});
    ASSERT_TRUE(unavailable.has_value());
    EXPECT_EQ(unavailable->state, SandboxState::error);
    EXPECT_FALSE(listedSandboxRecord({{"id", "snap-x"}}).has_value());
    EXPECT_FALSE(listedSandboxRecord(nlohmann::json::array()).has_value());
    EXPECT_FALSE(listedSandboxRecord({{"id", 7}}).has_value());
    auto hostile = listedSandboxRecord(
        {{"id", "sbx-y"}, {"vcpus", -1}, {"memory_mib", "lots"}, {"metadata", "x"}});
    ASSERT_TRUE(hostile.has_value());
    EXPECT_EQ(hostile->vcpus, 0u);
    EXPECT_EQ(hostile->metadataJson, "{}");
}

}  // namespace
}  // namespace airlock::api

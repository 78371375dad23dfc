#include <gtest/gtest.h>

#include <map>

#include "controller/CommandJudge.hpp"

namespace airlock {
namespace {

class CommandJudgeTest : public ::testing::Test {
  protected:
    std::map<std::string, TenantRecord> tenants;
    CommandJudge judge{policy::PolicyRules{},
                       [this](const std::string& name) -> std::optional<TenantRecord> {
                           auto it = tenants.find(name);
                           if (it == tenants.end()) return std::nullopt;
                           return it->second;
                       }};

    SandboxRecord sandbox(const std::string& policyJson = "{}", const std::string& taskJson = "") {
        SandboxRecord r;
        r.id = "sbx-a";
        r.tenant = "t1";
        r.policyJson = policyJson;
        r.taskJson = taskJson;
        return r;
    }
    static ExecOptions argv(std::vector<std::string> args) {
        ExecOptions o;
        o.argv = std::move(args);
        return o;
    }
};

TEST_F(CommandJudgeTest, ATenantsDenyBeatsTheSandboxsAllowFromItsNextCommandOn) {
    // A dependency change waits for a human by default; the sandbox allows it.
    EXPECT_EQ(judge.judge(sandbox(), argv({"npm", "install", "left-pad"})).decision,
              policy::Decision::approve);
    auto r = sandbox(R"({"allow":["npm install *"]})");
    EXPECT_EQ(judge.judge(r, argv({"npm", "install", "left-pad"})).decision,
              policy::Decision::allow);
    TenantRecord t;
    t.name = "t1";
    t.deny = {"npm install *"};
    tenants["t1"] = t;
    auto v = judge.judge(r, argv({"npm", "install", "left-pad"}));
    EXPECT_EQ(v.decision, policy::Decision::deny) << v.reason;
    // Another tenant's rules are not this sandbox's.
    r.tenant = "t2";
    EXPECT_EQ(judge.judge(r, argv({"npm", "install", "left-pad"})).decision,
              policy::Decision::allow);
}

TEST_F(CommandJudgeTest, AnUnreadablePolicyColumnLeavesOnlyTheTenantsRules) {
    TenantRecord t;
    t.approve = {"deploy *"};
    tenants["t1"] = t;
    auto rules = judge.rulesOf(sandbox("not json"));
    EXPECT_TRUE(rules.deny.empty());
    EXPECT_TRUE(rules.allow.empty());
    EXPECT_EQ(rules.approve, std::vector<std::string>{"deploy *"});
    ExecOptions shell;
    shell.shell = "echo hi && deploy prod";
    EXPECT_EQ(judge.judge(sandbox(), shell).decision, policy::Decision::approve)
        << "every part of a shell string is judged";
}

TEST_F(CommandJudgeTest, ATestRunIsAskedForOrOneOfTheTasksTestCommands) {
    auto task = sandbox("{}", R"({"test_commands":["pytest -q"]})");
    EXPECT_TRUE(CommandJudge::isTestRun(task, argv({"pytest", "-q"})));
    EXPECT_FALSE(CommandJudge::isTestRun(task, argv({"python3", "app.py"})));
    auto asked = argv({"make", "check"});
    asked.purpose = "test";
    EXPECT_TRUE(CommandJudge::isTestRun(sandbox(), asked));
    EXPECT_FALSE(CommandJudge::isTestRun(sandbox("{}", R"({"test_commands":"pytest -q"})"),
                                         argv({"pytest", "-q"})));
    EXPECT_FALSE(CommandJudge::isTestRun(sandbox("{}", "{broken"), argv({"pytest", "-q"})));
}

TEST_F(CommandJudgeTest, TheAuditDataNamesTheCommandItsDoorAndItsExec) {
    auto o = argv({"ls", "-la"});
    o.cwd = "/work";
    auto rest = CommandJudge::auditData(sandbox(), o, nullptr);
    EXPECT_EQ(rest["command"], "ls -la");
    EXPECT_EQ(rest["user"], "user") << "the default user is named";
    EXPECT_EQ(rest["cwd"], "/work");
    EXPECT_FALSE(rest.contains("path"));
    EXPECT_FALSE(rest.contains("exec_id"));
    EXPECT_FALSE(rest.contains("purpose"));
    o.trace = "ex-1";
    o.user = "root";
    o.purpose = "test";
    auto ws = CommandJudge::auditData(sandbox(), o, "exec/ws");
    EXPECT_EQ(ws["path"], "exec/ws");
    EXPECT_EQ(ws["exec_id"], "ex-1");
    EXPECT_EQ(ws["user"], "root");
    EXPECT_EQ(ws["purpose"], "test");
}

TEST_F(CommandJudgeTest, ARefusalMasksASecretTypedIntoTheCommand) {
    auto r = sandbox(R"({"deny":["curl *"]})");
    auto v = judge.judge(r, argv({"curl", "-H", "x: t0ken-Value-1", "http://h"}));
    ASSERT_EQ(v.decision, policy::Decision::deny);
    auto e = CommandJudge::denied(v, SecretMasker({"t0ken-Value-1"}));
    EXPECT_EQ(e.code(), ErrorCode::policy_denied);
    EXPECT_EQ(std::string(e.what()).find("t0ken-Value-1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("denied by the command policy"), std::string::npos);
    EXPECT_EQ(CommandJudge::verdictJson(v)["decision"], "deny");
}

}  // namespace
}  // namespace airlock

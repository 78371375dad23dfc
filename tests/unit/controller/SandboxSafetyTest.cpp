// The command policy on the controller's exec paths, approval gates and the
// audit log, over the fake hypervisor with real in-process agents. Commands
// that run here run on the host (in a temp dir): the gated ones are harmless
// by construction (sandbox rules gate `touch`).
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>

#include "ControllerFixture.hpp"
#include "core/Error.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
namespace fs = std::filesystem;
using test::codeOf;
using namespace std::chrono_literals;

class SandboxSafetyTest : public test::ControllerFixture {
  protected:
    SandboxRecord sandboxWithRules() {
        CreateSandboxRequest r;
        r.policy.deny = {"echo forbidden*"};
        r.policy.approve = {"touch *"};
        return controller->create("t1", r);
    }
    ExecOptions shell(const std::string& s) {
        ExecOptions o;
        o.shell = s;
        o.user = "root";  // the in-process agent runs on the host
        return o;
    }
    std::vector<std::string> types(const std::string& id) {
        std::vector<std::string> out;
        for (const auto& e : controller->audit("t1", id, AuditQuery{})) out.push_back(e.type);
        return out;
    }
};

TEST_F(SandboxSafetyTest, DeniedCommandsNeverReachTheGuestAndAreAudited) {
    auto s = sandboxWithRules();
    std::string marker = dir.path() + "/should-not-exist";
    auto denied = [&](const std::string& cmd) {
        try {
            controller->commands().submit("t1", s.id, shell(cmd));
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::policy_denied) << cmd;
            return std::string(e.what());
        }
        ADD_FAILURE() << cmd << " was not denied";
        return std::string();
    };
    EXPECT_NE(denied("touch " + marker + "; echo forbidden fruit").find("echo forbidden*"),
              std::string::npos);
    EXPECT_NE(denied("touch " + marker + " && cat .env").find("secret_access"), std::string::npos);
    EXPECT_FALSE(fs::exists(marker)) << "no part of a denied request runs";
    // The other paths refuse too (and cannot wait for approvals).
    EXPECT_EQ(codeOf([&] { controller->commands().exec("t1", s.id, shell("echo forbidden")); }),
              ErrorCode::policy_denied);
    EXPECT_EQ(codeOf([&] { controller->commands().exec("t1", s.id, shell("touch " + marker)); }),
              ErrorCode::policy_denied);
    EXPECT_EQ(codeOf([&] {
                  ExecOptions o;
                  o.argv = {"/bin/sh", "-c", "echo forbidden"};
                  controller->processes().start("t1", s.id, o, false);
              }),
              ErrorCode::policy_denied);
    EXPECT_FALSE(fs::exists(marker));
    auto ok = controller->commands().submit("t1", s.id, shell("echo fine"));
    ASSERT_TRUE(ok.output);
    EXPECT_EQ(ok.output->stdoutData, "fine\n");
    auto t = types(s.id);
    EXPECT_EQ(std::count(t.begin(), t.end(), "exec.denied"), 5);
    EXPECT_EQ(std::count(t.begin(), t.end(), "exec.executed"), 1);
}

TEST_F(SandboxSafetyTest, GatedCommandsWaitForADecision) {
    auto s = sandboxWithRules();
    std::string approvedFile = dir.path() + "/approved", deniedFile = dir.path() + "/denied";
    auto a =
        controller->commands().submit("t1", s.id, shell("touch " + approvedFile + " && echo done"));
    auto d = controller->commands().submit("t1", s.id, shell("touch " + deniedFile));
    ASSERT_TRUE(a.pending && d.pending);
    EXPECT_EQ(a.pending->state, "pending_approval");
    EXPECT_EQ(controller->gates().pending(TenantScope::only("t1")).size(), 2u);
    EXPECT_TRUE(controller->gates().pending(TenantScope::only("t2")).empty());
    EXPECT_FALSE(fs::exists(approvedFile)) << "nothing runs before a decision";

    EXPECT_EQ(
        codeOf([&] { controller->decideApproval("t2", a.pending->approvalId, true, "", "x"); }),
        ErrorCode::not_found);
    controller->decideApproval("t1", a.pending->approvalId, true, "needed for the task",
                               "reviewer");
    controller->decideApproval("t1", d.pending->approvalId, false, "not needed", "reviewer");
    EXPECT_EQ(
        codeOf([&] { controller->decideApproval("t1", d.pending->approvalId, true, "", "x"); }),
        ErrorCode::conflict)
        << "a decision is final";
    ASSERT_TRUE(test::waitFor(
        [&] { return controller->gates().get("t1", s.id, a.pending->id).state == "exited"; },
        std::chrono::seconds(20)));
    auto ran = controller->gates().get("t1", s.id, a.pending->id);
    EXPECT_EQ(ran.exitCode, 0);
    EXPECT_EQ(ran.stdoutData, "done\n");
    EXPECT_EQ(ran.decisionReason, "needed for the task");
    EXPECT_TRUE(fs::exists(approvedFile));
    EXPECT_EQ(controller->gates().get("t1", s.id, d.pending->id).state, "denied");
    EXPECT_FALSE(fs::exists(deniedFile));
    EXPECT_TRUE(controller->gates().pending(TenantScope::only("t1")).empty());

    auto t = types(s.id);
    for (const char* want :
         {"exec.pending_approval", "approval.approved", "approval.denied", "exec.executed"})
        EXPECT_NE(std::find(t.begin(), t.end(), want), t.end()) << want;
}

TEST_F(SandboxSafetyTest, AnApprovedCommandRunningWhenItsSandboxIsDeletedFailsSayingWhy) {
    auto s = sandboxWithRules();
    std::string marker = dir.path() + "/started";
    auto a = controller->commands().submit("t1", s.id, shell("touch " + marker + "; sleep 20"));
    ASSERT_TRUE(a.pending);
    controller->decideApproval("t1", a.pending->approvalId, true, "ok", "reviewer");
    ASSERT_TRUE(test::waitFor([&] { return fs::exists(marker); }, 10s, 10ms));
    controller->destroy("t1", s.id);
    ASSERT_TRUE(test::waitFor(
        [&] { return controller->gates().get("t1", s.id, a.pending->id).state == "failed"; }, 10s))
        << "the approved run did not end with its sandbox";
    auto ran = controller->gates().get("t1", s.id, a.pending->id);
    EXPECT_NE(ran.error.find("is gone: it was deleted"), std::string::npos) << ran.error;
    auto t = types(s.id);
    EXPECT_NE(std::find(t.begin(), t.end(), "exec.failed"), t.end())
        << "the run's end was seen before it was audited";
}

TEST_F(SandboxSafetyTest, PendingApprovalsExpire) {
    ControllerConfig config;
    config.dataDir = dir.path();
    config.approvalTimeoutS = 0;
    controller = makeController(config);
    auto s = sandboxWithRules();
    auto p = controller->commands().submit("t1", s.id, shell("touch " + dir.path() + "/late"));
    ASSERT_TRUE(p.pending);
    controller->enforceTimeouts();
    EXPECT_EQ(controller->gates().get("t1", s.id, p.pending->id).state, "expired");
    EXPECT_EQ(
        codeOf([&] { controller->decideApproval("t1", p.pending->approvalId, true, "", "x"); }),
        ErrorCode::conflict);
}

TEST_F(SandboxSafetyTest, TheAuditLogOutlivesTheSandboxAndStaysWithItsTenant) {
    auto s = sandboxWithRules();
    controller->commands().submit("t1", s.id, shell("echo hello"));
    controller->destroy("t1", s.id);
    auto events = controller->audit("t1", s.id, AuditQuery{});
    ASSERT_GE(events.size(), 3u);
    EXPECT_EQ(events.front().type, "sandbox.created");
    EXPECT_EQ(events.back().type, "sandbox.deleted");
    auto executed = std::find_if(events.begin(), events.end(),
                                 [](const AuditEvent& e) { return e.type == "exec.executed"; });
    ASSERT_NE(executed, events.end());
    auto data = nlohmann::json::parse(executed->dataJson);
    EXPECT_EQ(data["command"], "echo hello");
    EXPECT_EQ(data["exit_code"], 0);
    EXPECT_EQ(data["policy"]["class"], "inspection");
    EXPECT_EQ(codeOf([&] { controller->audit("t2", s.id, AuditQuery{}); }), ErrorCode::not_found);
    AuditQuery onlyExec;
    onlyExec.type = "exec.";
    for (const auto& e : controller->audit("t1", s.id, onlyExec))
        EXPECT_EQ(e.type.rfind("exec.", 0), 0u);
    AuditQuery page;
    page.limit = 1;
    page.after = events.front().seq;
    ASSERT_EQ(controller->audit("t1", s.id, page).size(), 1u);
    EXPECT_EQ(controller->audit("t1", s.id, page)[0].seq, events[1].seq);
}

}  // namespace
}  // namespace airlock

namespace airlock {
namespace {

using SecretsTest = test::ControllerFixture;

TEST_F(SecretsTest, SecretsAreInjectedMaskedScopedAndNeverStoredInTheClear) {
    CreateSandboxRequest r;
    r.secrets["API_TOKEN"] = SecretSpec{"s3cr3t-Value-9137", {}};
    r.secrets["DEPLOY_KEY"] = SecretSpec{"deploy-Key-5521", {"deploy *"}};
    auto s = controller->create("t1", r);
    EXPECT_EQ(nlohmann::json(store->find(s.id)->secretNames),
              nlohmann::json({"API_TOKEN", "DEPLOY_KEY"}));
    ExecOptions o;
    o.user = "root";
    o.shell =
        "test \"$API_TOKEN\" = s3cr3t-Value-9137 && echo has-secret; echo \"token=$API_TOKEN\"; "
        "printf %s \"$API_TOKEN\" | base64; echo \"deploy=${DEPLOY_KEY:-unset}\"";
    auto out = controller->commands().submit("t1", s.id, o);
    ASSERT_TRUE(out.output);
    EXPECT_EQ(out.output->stdoutData, "has-secret\ntoken=***\n***\ndeploy=unset\n")
        << "masked in clear and base64; a scoped secret stays out of other commands";
    for (const auto& e : controller->audit("t1", s.id, AuditQuery{}))
        EXPECT_EQ(e.dataJson.find("s3cr3t"), std::string::npos) << e.dataJson;
    // Nothing under the data dir holds a value in the clear (the database included).
    for (const auto& f : fs::recursive_directory_iterator(dir.path())) {
        if (!f.is_regular_file()) continue;
        std::ifstream in(f.path(), std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        EXPECT_EQ(bytes.find("s3cr3t-Value-9137"), std::string::npos) << f.path();
        EXPECT_EQ(bytes.find("deploy-Key-5521"), std::string::npos) << f.path();
    }
    CreateSandboxRequest weak;
    weak.secrets["X"] = SecretSpec{"abc1234", {}};
    EXPECT_EQ(codeOf([&] { controller->create("t1", weak); }), ErrorCode::unprocessable)
        << "under 8 bytes a value cannot be masked without editing ordinary text";
}

TEST_F(SecretsTest, TheTaskIsStoredMaskedAndItsTestCommandsAreMarkedInTheAudit) {
    CreateSandboxRequest r;
    r.secrets["API_TOKEN"] = SecretSpec{"s3cr3t-Value-9137", {}};
    {
        TaskSpec task;
        task.id = "task-1";
        task.prompt = "use token s3cr3t-Value-9137 to deploy";
        task.testCommands = {"echo tests-ran"};
        task.sensitivePaths = {"auth/**"};
        r.task = task;
    }
    r.artifacts = {"reports/*.xml"};
    auto s = controller->create("t1", r);
    auto stored = store->find(s.id);
    EXPECT_EQ(stored->taskJson.find("s3cr3t"), std::string::npos) << stored->taskJson;
    EXPECT_NE(stored->taskJson.find("use token *** to deploy"), std::string::npos)
        << stored->taskJson;
    EXPECT_EQ(stored->artifacts, std::vector<std::string>{"reports/*.xml"});
    ExecOptions o;
    o.user = "root";
    o.shell = "cd / && echo tests-ran";  // the task's test command: marked without asking
    controller->commands().submit("t1", s.id, o);
    o.shell = "echo not-a-test";
    controller->commands().submit("t1", s.id, o);
    o.shell = "exit 3";
    o.purpose = "test";  // asked for
    controller->commands().submit("t1", s.id, o);
    std::vector<std::pair<std::string, bool>> seen;
    for (const auto& e : controller->audit("t1", s.id, AuditQuery{})) {
        if (e.type != "exec.executed") continue;
        auto data = nlohmann::json::parse(e.dataJson);
        seen.emplace_back(data["command"], data.value("purpose", "") == "test");
    }
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_TRUE(seen[0].second) << seen[0].first;
    EXPECT_FALSE(seen[1].second) << seen[1].first;
    EXPECT_TRUE(seen[2].second) << seen[2].first;
}

TEST_F(SecretsTest, ASealedSecretMovedToAnotherSandboxDoesNotOpen) {
    CreateSandboxRequest r;
    r.secrets["TOKEN"] = SecretSpec{"victim-Secret-4411", {}};
    auto victim = controller->create("t1", r);
    CreateSandboxRequest mine;
    mine.secrets["TOKEN"] = SecretSpec{"attacker-Own-9090", {}};
    auto attacker = controller->create("t2", mine);
    // Someone with write access to the database copies the victim's blob.
    auto row = *store->find(attacker.id);
    row.secretsSealed = store->find(victim.id)->secretsSealed;
    store->replace(row);
    ExecOptions o;
    o.user = "root";
    o.shell = "echo \"$TOKEN\"";
    try {
        auto out = controller->commands().submit("t2", attacker.id, o);
        ASSERT_TRUE(out.output);
        EXPECT_EQ(out.output->stdoutData.find("victim-Secret"), std::string::npos)
            << "another sandbox's secret was opened and injected";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::internal);
    }
}

TEST_F(SecretsTest, ProcessListingsAndFileListingsAreMasked) {
    CreateSandboxRequest r;
    r.secrets["API_TOKEN"] = SecretSpec{"s3cr3t-Value-9137", {}};
    auto s = controller->create("t1", r);
    ExecOptions start;
    start.argv = {"/bin/sh", "-c", "sleep 30 # s3cr3t-Value-9137"};
    start.user = "root";
    auto started = controller->processes().start("t1", s.id, start, false);
    auto text = [](const auto& typed) { return protocol::toJsonValue(typed).dump(); };
    EXPECT_EQ(text(started).find("s3cr3t-Value-9137"), std::string::npos) << text(started);
    auto call = [&](protocol::Op op, const std::string& id = "") {
        protocol::ProcessCall c;
        c.op = op;
        c.id = id;
        c.signal = "KILL";
        return controller->processes().call("t1", s.id, c);
    };
    auto listed = text(controller->processes().list("t1", s.id));
    EXPECT_EQ(listed.find("s3cr3t-Value-9137"), std::string::npos) << listed;
    EXPECT_NE(listed.find("***"), std::string::npos) << "the command is shown, masked: " << listed;
    std::string id = std::to_string(started.pid);
    auto one = text(call(protocol::Op::process_get, id));
    EXPECT_EQ(one.find("s3cr3t-Value-9137"), std::string::npos) << one;
    call(protocol::Op::process_signal, id);
    // Only process calls pass this door (not files, not a start that would
    // skip the policy, not a list that answers another shape).
    for (auto op : {protocol::Op::exec, protocol::Op::fs, protocol::Op::process_start,
                    protocol::Op::process_list})
        EXPECT_EQ(codeOf([&] { call(op); }), ErrorCode::bad_request) << protocol::opName(op);
    // A file listing answers masked too: a guest may name a file after a secret.
    std::string listed_dir = dir.path() + "/listed";
    fs::create_directories(listed_dir);
    std::ofstream(listed_dir + "/s3cr3t-Value-9137.txt") << "x";
    protocol::FsRequest list;
    list.action = protocol::FsRequest::Action::list;
    list.path = listed_dir;
    list.user = "root";
    auto files = text(controller->files().fileOp("t1", s.id, list));
    EXPECT_EQ(files.find("s3cr3t-Value-9137"), std::string::npos) << files;
    EXPECT_NE(files.find("***.txt"), std::string::npos) << files;
}

}  // namespace
}  // namespace airlock

namespace airlock {
namespace {

class ApprovalLifetimeTest : public test::ControllerFixture {};

TEST_F(ApprovalLifetimeTest, PendingApprovalsEndWithTheirSandbox) {
    CreateSandboxRequest r;
    r.policy.approve = {"touch *"};
    auto s = controller->create("t1", r);
    ExecOptions o;
    o.user = "root";
    o.shell = "touch " + dir.path() + "/never";
    auto submitted = controller->commands().submit("t1", s.id, o);
    ASSERT_TRUE(submitted.pending);
    ASSERT_EQ(controller->gates().pending(TenantScope::only("t1")).size(), 1u);
    controller->destroy("t1", s.id);
    EXPECT_TRUE(controller->gates().pending(TenantScope::only("t1")).empty())
        << "an approval outlived its sandbox";
    EXPECT_EQ(codeOf([&] {
                  controller->decideApproval("t1", submitted.pending->approvalId, true, "", "k");
              }),
              ErrorCode::conflict);
    EXPECT_FALSE(fs::exists(dir.path() + "/never"));
    bool audited = false;
    for (const auto& e : controller->audit("t1", s.id, AuditQuery{}))
        audited = audited || (e.type == "approval.cancelled" &&
                              e.dataJson.find("deleted") != std::string::npos);
    EXPECT_TRUE(audited);
}

TEST_F(ApprovalLifetimeTest, AnEmptyTenantNeverMeansEveryTenant) {
    controller->create("t1", CreateSandboxRequest{});
    EXPECT_EQ(codeOf([&] { controller->list(""); }), ErrorCode::internal);
    EXPECT_EQ(codeOf([&] { controller->gates().pending(TenantScope::only("")); }),
              ErrorCode::internal);
    EXPECT_EQ(codeOf([&] { controller->snapshots().list(""); }), ErrorCode::internal);
    EXPECT_EQ(store->list(TenantScope::only("t1")).size(), 1u);
    EXPECT_TRUE(store->list(TenantScope::only("t2")).empty());
    EXPECT_EQ(store->list(TenantScope::all()).size(), 1u);
}

TEST_F(ApprovalLifetimeTest, LongExecsHoldNoCallerThread) {
    auto s = controller->create("t1", CreateSandboxRequest{});
    ExecOptions o;
    o.user = "root";
    o.shell = "sleep 2; echo late";
    std::mutex mutex;
    std::condition_variable cv;
    int finished = 0;
    std::vector<std::string> outputs;
    auto started = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) {
        auto pending = controller->commands().submitAsync(
            "t1", s.id, o, [&](std::optional<ExecOutput> out, std::exception_ptr) {
                std::lock_guard lock(mutex);
                outputs.push_back(out ? out->stdoutData : "error");
                ++finished;
                cv.notify_all();
            });
        EXPECT_FALSE(pending);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2))
        << "submitting waited for the commands";
    std::unique_lock lock(mutex);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return finished == 20; }));
    for (const auto& out : outputs) EXPECT_EQ(out, "late\n");
}

}  // namespace
}  // namespace airlock

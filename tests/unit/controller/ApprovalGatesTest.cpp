#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "controller/ApprovalGates.hpp"
#include "core/Error.hpp"
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

}  // namespace
}  // namespace airlock

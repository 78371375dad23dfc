// ApprovalRouter: what a decision lets through, by what was parked, over the
// commands' fixture (the real agent in this process, real gates).
#include "controller/ApprovalRouter.hpp"

#include <filesystem>

#include "unit/controller/CommandsFixture.hpp"

namespace airlock {
namespace {
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using test::asRootShell;
using test::codeOf;

class ApprovalRouterTest : public test::CommandsFixture {
  protected:
    ApprovalRouter router{gates, *commands};
    const std::string& id() const { return access.sandbox.id; }
    GatedExec parkPush(const std::string& pushId) {
        return gates.parkPublish(access.sandbox, pushId, "git push", "a push publishes",
                                 {{"push_id", pushId}, {"commit", std::string(40, 'a')}});
    }
};

TEST_F(ApprovalRouterTest, AnApprovedExecRunsAndADeniedOneNever) {
    std::string approved = dir.path() + "/approved", denied = dir.path() + "/denied";
    auto yes = commands->submit("t1", id(), asRootShell("touch " + approved));
    auto no = commands->submit("t1", id(), asRootShell("touch " + denied));
    ASSERT_TRUE(yes.pending && no.pending);
    router.decideApproval("t1", no.pending->approvalId, false, "no", "human");
    router.decideApproval("t1", yes.pending->approvalId, true, "ok", "human");
    ASSERT_TRUE(test::waitFor([&] { return gates.find(yes.pending->id)->state == "exited"; }, 10s,
                              10ms));
    EXPECT_TRUE(fs::exists(approved));
    EXPECT_FALSE(fs::exists(denied));
    EXPECT_EQ(gates.find(no.pending->id)->state, "denied");
    EXPECT_EQ(codeOf([&] { router.decideApproval("t1", no.pending->approvalId, true, "", "h"); }),
              ErrorCode::conflict)
        << "decided once";
    EXPECT_EQ(codeOf([&] { router.decideApproval("t2", yes.pending->approvalId, true, "", "h"); }),
              ErrorCode::not_found);
}

TEST_F(ApprovalRouterTest, APushGoesToThePublishHandlerAndFailsWithoutOne) {
    auto first = parkPush("psh-first");
    auto decided = router.decideApproval("t1", first.approvalId, true, "", "human");
    EXPECT_EQ(decided.state, "failed");
    EXPECT_EQ(decided.error, "workspaces are not configured");

    std::vector<std::pair<std::string, bool>> handed;
    router.setPublishHandler(
        [&](const GatedExec& g, bool approve) { handed.emplace_back(g.id, approve); });
    auto second = parkPush("psh-second");
    auto third = parkPush("psh-third");
    router.decideApproval("t1", second.approvalId, true, "", "human");
    router.decideApproval("t1", third.approvalId, false, "not now", "human");
    EXPECT_EQ(handed, (std::vector<std::pair<std::string, bool>>{{"psh-second", true},
                                                                  {"psh-third", false}}));
    EXPECT_EQ(gates.find("psh-second")->state, "running") << "the handler's worker finishes it";
}

TEST_F(ApprovalRouterTest, APackageVersionIsLetThroughAndNothingRuns) {
    packages::PackageApprovalRequest q{id(), "t1", packages::Ecosystem::npm, "left-pad", "1.3.0",
                                       "younger than the minimum age"};
    auto asked = gates.packageApproval(q);
    ASSERT_EQ(asked.state, packages::PackageApprovalState::State::pending);
    auto decided = router.decideApproval("t1", asked.approvalId, true, "", "human");
    EXPECT_EQ(decided.state, "approved");
    EXPECT_EQ(gates.packageApproval(q).state, packages::PackageApprovalState::State::approved);
    EXPECT_TRUE(access.recordsOf("exec.executed").empty());
}

TEST_F(ApprovalRouterTest, AStreamedExecWhoseClientLeftFailsInsteadOfRunning) {
    std::string marker = dir.path() + "/streamed";
    policy::Verdict verdict;
    verdict.decision = policy::Decision::approve;
    verdict.reason = "touch needs approval";
    auto parked = gates.parkExec(access.sandbox, asRootShell("touch " + marker), verdict,
                                 nlohmann::json::object(), access.guestOutputMasker(access.sandbox),
                                 true);
    auto decided = router.decideApproval("t1", parked.approvalId, true, "", "human");
    EXPECT_EQ(decided.state, "failed");
    EXPECT_EQ(decided.error, "the streaming client had left");
    EXPECT_FALSE(fs::exists(marker));
}

}  // namespace
}  // namespace airlock

#include "workspace/WorkspacePushes.hpp"

#include "unit/workspace/WorkspaceFixture.hpp"

namespace airlock::workspace {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::codeOf;

class WorkspacePushesTest : public test::WorkspaceFixture {
  protected:
    // A checkout with one commit on its task branch.
    std::pair<std::string, WorkspaceCommit> committed(const std::string& branch = "agent/t") {
        auto id = checkout(request("main", branch));
        write("src/app.py", "work of the agent\n");
        auto c = changes.commit("t1", id, "work", "Agent", "agent@example.com");
        return {id, c};
    }
    std::string finalState(const std::string& id, const std::string& pushId) {
        std::string state;
        test::waitFor(
            [&] {
                state = pushes.state("t1", id, pushId).state;
                return state != "pending_approval" && state != "approved" && state != "pushing";
            },
            30s, 20ms);
        return state;
    }
};

TEST_F(WorkspacePushesTest, APushWaitsForAHumanAndThenPushesExactlyTheApprovedCommit) {
    auto [id, c] = committed();
    auto asked = pushes.request("t1", id, c.commit);
    EXPECT_EQ(asked.state, "pending_approval");
    EXPECT_EQ(asked.lease, "") << "the branch is not on the remote yet";
    auto approval = sandboxes.gates().approval("t1", asked.approvalId);
    EXPECT_EQ(server.revParse("demo.git", "refs/heads/agent/t"), "") << "nothing pushed yet";
    EXPECT_NE(pushes.patch(approval).find("+work of the agent"), std::string::npos);

    sandboxes.decide("t1", asked.approvalId, true);
    EXPECT_EQ(finalState(id, asked.pushId), "pushed");
    EXPECT_EQ(server.revParse("demo.git", "refs/heads/agent/t"), c.commit);
    EXPECT_EQ(sandboxes.events("push.pushed").size(), 1u);
    auto requested = sandboxes.events("push.requested");
    ASSERT_EQ(requested.size(), 1u);
    EXPECT_EQ(requested[0].data["commit"], c.commit);
    EXPECT_EQ(requested[0].data["tree"], c.tree);
}

TEST_F(WorkspacePushesTest, TheApproverIsShownTheEvidenceSealedForExactlyTheCommitsTree) {
    auto [id, c] = committed();
    std::string sealedFor;
    pushes.setEvidenceSummary([&](const std::string& sandbox, const std::string& tree)
                                  -> std::optional<EvidenceBrief> {
        if (sandbox != id || tree != sealedFor) return std::nullopt;
        return EvidenceBrief{"evd-1", R"({"tests": "passed", "findings": ["secrets"]})"};
    });
    sealedFor = std::string(40, '0');  // a bundle of another tree says nothing
    auto other = pushes.request("t1", id, c.commit);
    auto shown = sandboxes.gates().verifiedRequest(sandboxes.gates().approval("t1", other.approvalId));
    EXPECT_TRUE(shown["evidence"].is_null());
    EXPECT_NE(shown["evidence_reason"].get<std::string>().find(c.tree), std::string::npos);

    sealedFor = c.tree;
    auto asked = pushes.request("t1", id, c.commit);
    auto approval = sandboxes.gates().approval("t1", asked.approvalId);
    shown = sandboxes.gates().verifiedRequest(approval);
    EXPECT_EQ(shown["evidence"]["id"], "evd-1");
    EXPECT_EQ(shown["evidence"]["summary"]["tests"], "passed");
    EXPECT_TRUE(shown["evidence_reason"].is_null());
    EXPECT_NE(approval.reason.find("evidence evd-1: tests passed, findings secrets"),
              std::string::npos)
        << approval.reason;
}

TEST_F(WorkspacePushesTest, ADeniedPushIsRecordedAndNeverRuns) {
    auto [id, c] = committed();
    auto asked = pushes.request("t1", id, c.commit);
    sandboxes.decide("t1", asked.approvalId, false);
    EXPECT_EQ(pushes.state("t1", id, asked.pushId).state, "denied");
    ASSERT_EQ(sandboxes.events("push.denied").size(), 1u);
    EXPECT_EQ(sandboxes.events("push.denied")[0].data["by"], "reviewer");
    EXPECT_EQ(server.revParse("demo.git", "refs/heads/agent/t"), "");
}

TEST_F(WorkspacePushesTest, OnlyTheHeadOfATaskBranchUnderThePrefixCanBeAskedFor) {
    auto id = checkout();
    EXPECT_EQ(codeOf([&] { pushes.request("t1", id, std::string(40, 'a')); }),
              ErrorCode::conflict)
        << "nothing committed";
    write("src/app.py", "one\n");
    auto first = changes.commit("t1", id, "one", "A", "a@example.com");
    write("src/app.py", "two\n");
    auto second = changes.commit("t1", id, "two", "A", "a@example.com");
    EXPECT_EQ(codeOf([&] { pushes.request("t1", id, first.commit); }), ErrorCode::conflict);
    EXPECT_EQ(codeOf([&] { pushes.request("t1", id, "not-hex"); }), ErrorCode::bad_request);
    EXPECT_EQ(codeOf([&] { pushes.request("t2", id, second.commit); }), ErrorCode::not_found);

    auto [other, c] = committed("release");
    EXPECT_EQ(codeOf([&] { pushes.request("t1", other, c.commit); }), ErrorCode::forbidden);
    EXPECT_TRUE(sandboxes.events("push.requested").empty());
}

TEST_F(WorkspacePushesTest, ABranchThatMovedSinceTheRequestRejectsTheApprovedPush) {
    auto [id, c] = committed();
    auto asked = pushes.request("t1", id, c.commit);
    // Someone else creates the branch on the remote before the approval.
    std::string main = server.revParse("demo.git", "main");
    test::commandLine("git --git-dir=" + server.repos + "/demo.git update-ref refs/heads/agent/t " +
                      main);
    sandboxes.decide("t1", asked.approvalId, true);
    EXPECT_EQ(finalState(id, asked.pushId), "rejected");
    EXPECT_NE(pushes.state("t1", id, asked.pushId).error.find("moved"), std::string::npos);
    EXPECT_EQ(server.revParse("demo.git", "refs/heads/agent/t"), main) << "the remote kept its own";
}

TEST_F(WorkspacePushesTest, ANewCommitOrAResetSupersedesAPendingPush) {
    auto [id, c] = committed();
    auto asked = pushes.request("t1", id, c.commit);
    write("src/app.py", "more work\n");
    auto next = changes.commit("t1", id, "more", "A", "a@example.com");
    EXPECT_EQ(pushes.state("t1", id, asked.pushId).state, "superseded");
    EXPECT_EQ(codeOf([&] { sandboxes.decide("t1", asked.approvalId, true); }), ErrorCode::conflict);

    auto again = pushes.request("t1", id, next.commit);
    checkouts.reset("t1", id, false);
    EXPECT_EQ(pushes.state("t1", id, again.pushId).state, "superseded");
    EXPECT_EQ(server.revParse("demo.git", "refs/heads/agent/t"), "");
}

TEST_F(WorkspacePushesTest, APushIdOfAnotherSandboxOrTenantIsNotFound) {
    auto [id, c] = committed();
    auto asked = pushes.request("t1", id, c.commit);
    auto other = checkout();
    EXPECT_EQ(codeOf([&] { pushes.state("t1", other, asked.pushId); }), ErrorCode::not_found);
    EXPECT_EQ(codeOf([&] { pushes.state("t2", id, asked.pushId); }), ErrorCode::not_found);
    EXPECT_EQ(codeOf([&] { pushes.state("t1", id, "psh-nope"); }), ErrorCode::not_found);
}

}  // namespace
}  // namespace airlock::workspace

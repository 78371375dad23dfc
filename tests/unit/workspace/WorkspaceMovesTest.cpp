#include <fstream>

#include "unit/workspace/WorkspaceFixture.hpp"
#include "workspace/WorkspaceMoves.hpp"

namespace airlock::workspace {
namespace {
using test::codeOf;

// A second node: its own data dir and stores, the fleet's credential, the
// same guest (the fake sandboxes' tree) once the sandbox has moved there.
class WorkspaceMovesTest : public test::WorkspaceFixture {
  protected:
    WorkspaceMovesTest() {
        otherCredentials.add(
            "t1", {"fx", "https-basic", server.hostPort(), "git", server.password, "", {}});
    }
    std::string pack = dir.path() + "/workspace.pack";
    WorkspaceMoves here{config, credentials, mirrors, records};

    Database otherDb{dir.path() + "/other.db"};
    CredentialStore otherCredentialStore{otherDb};
    WorkspaceStore otherStore{otherDb};
    WorkspaceConfig otherConfig = makeConfig(dir.path() + "/other");
    WorkspaceCredentials otherCredentials{
        otherCredentialStore, otherConfig.cipher, otherConfig.addressPolicy,
        [](const std::string&, const std::string&, const nlohmann::json&) {}};
    GitMirrors otherMirrors{otherConfig, nullptr};
    WorkspaceRecords otherRecords{otherStore, sandboxes, otherMirrors};
    WorkspaceChanges otherChanges{otherConfig, sandboxes, otherMirrors, otherRecords, guest};
    WorkspaceMoves there{otherConfig, otherCredentials, otherMirrors, otherRecords};
};

TEST_F(WorkspaceMovesTest, TheHostsCommitsArriveAndTheTaskBranchGoesOnThere) {
    auto id = checkout();
    write("src/app.py", "moved\n");
    auto first = changes.commit("t1", id, "before the move", "Agent", "agent@example.com");
    ASSERT_TRUE(here.packOut("t1", id, pack));
    there.arrive("t1", id, *store.find(id), pack);

    auto r = otherRecords.load("t1", id);
    EXPECT_EQ(r.head, first.commit);
    EXPECT_EQ(r.baseCommit, server.revParse("demo.git", "main"));
    EXPECT_TRUE(otherChanges.diff("t1", id).diff.files.size() == 1u) << "against the base";
    write("src/app.py", "after\n");
    auto second = otherChanges.commit("t1", id, "after the move", "Agent", "agent@example.com");
    EXPECT_EQ(second.parent, first.commit) << "the commit made on the old node is the parent";
}

TEST_F(WorkspaceMovesTest, WithoutAHostCommitOnlyTheRecordTravels) {
    auto id = checkout();
    EXPECT_FALSE(here.packOut("t1", id, pack));
    EXPECT_FALSE(std::filesystem::exists(pack));
    there.arrive("t1", id, *store.find(id), "");
    EXPECT_TRUE(otherRecords.load("t1", id).head.empty());
    write("NEW.md", "new\n");
    EXPECT_EQ(otherChanges.diff("t1", id).diff.files.size(), 1u);
}

TEST_F(WorkspaceMovesTest, ABaseTheRemoteLostOrABadPackRecordsNothing) {
    auto id = checkout();
    auto j = nlohmann::json::parse(*store.find(id));
    j["base_commit"] = std::string(40, 'e');
    EXPECT_EQ(codeOf([&] { there.arrive("t1", id, j.dump(), ""); }), ErrorCode::unprocessable);
    EXPECT_FALSE(otherStore.find(id));

    write("src/app.py", "moved\n");
    changes.commit("t1", id, "c", "Agent", "agent@example.com");
    std::ofstream(pack) << "PACK not really";
    EXPECT_EQ(codeOf([&] { there.arrive("t1", id, *store.find(id), pack); }),
              ErrorCode::bad_request);
    EXPECT_FALSE(otherStore.find(id));
    EXPECT_EQ(codeOf([&] { there.arrive("t1", id, *store.find(id), ""); }), ErrorCode::bad_request)
        << "a head without its pack";
    EXPECT_EQ(codeOf([&] { there.arrive("t1", id, "[]", ""); }), ErrorCode::bad_request);
    EXPECT_FALSE(otherStore.find(id));
}

}  // namespace
}  // namespace airlock::workspace

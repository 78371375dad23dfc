#include "workspace/WorkspaceCheckouts.hpp"

#include "unit/workspace/WorkspaceFixture.hpp"

namespace airlock::workspace {
namespace {
namespace fs = std::filesystem;
using test::codeOf;

class WorkspaceCheckoutsTest : public test::WorkspaceFixture {};

TEST_F(WorkspaceCheckoutsTest, TheGuestGetsTheBaseFilesSubmodulesAndACleanGitButNoCredential) {
    auto id = checkout();
    EXPECT_EQ(read("src/app.py"), "def add(a, b):\n    return a + b\n");
    EXPECT_EQ(read("vendor/lib/helper.py"), "def helper(): return 42\n") << "submodules too";
    EXPECT_EQ(read("vendor/lib/.git"), "gitdir: ../../.git/modules/vendor/lib\n");
    EXPECT_TRUE(fs::perms::owner_exec ==
                (fs::status(tree + "/scripts/build.sh").permissions() & fs::perms::owner_exec));
    EXPECT_EQ(read(".git/HEAD"), "ref: refs/heads/agent/t\n");
    std::string gitConfig = read(".git/config");
    EXPECT_NE(gitConfig.find(server.base() + "/demo.git"), std::string::npos) << gitConfig;
    EXPECT_EQ(test::commandOutput("grep -r -a -l '" + server.password + "' " + tree), "")
        << "the credential reached the guest's tree";

    auto r = records.load("t1", id);
    EXPECT_EQ(r.baseCommit, server.revParse("demo.git", "main"));
    EXPECT_EQ(r.baseRef, "main");
    ASSERT_EQ(r.submodules.size(), 1u);
    EXPECT_EQ(r.submodules[0].path, "vendor/lib");
    auto cloned = sandboxes.events("workspace.cloned");
    ASSERT_EQ(cloned.size(), 1u);
    EXPECT_EQ(cloned[0].data["base_commit"], r.baseCommit);
    EXPECT_EQ(sandboxes.watched(), std::vector<std::string>{tree})
        << "the guest's own reads and writes in it are recorded from here on";
}

TEST_F(WorkspaceCheckoutsTest, ARefBranchOrCommitThatCannotBeUsedBootsNothing) {
    EXPECT_EQ(codeOf([&] { checkout(request("no-such-ref")); }), ErrorCode::unprocessable);
    EXPECT_EQ(codeOf([&] { checkout(request("main", "-x")); }), ErrorCode::bad_request);
    EXPECT_EQ(codeOf([&] { checkout(request("main", "HEAD")); }), ErrorCode::bad_request);
    auto byCommit = request();
    byCommit.workspace->ref.clear();
    byCommit.workspace->commit = std::string(40, 'e');
    EXPECT_EQ(codeOf([&] { checkout(byCommit); }), ErrorCode::unprocessable);
    auto ofSnapshot = request();
    ofSnapshot.snapshot = "snap-1";
    EXPECT_EQ(codeOf([&] { checkout(ofSnapshot); }), ErrorCode::bad_request);
    EXPECT_TRUE(sandboxes.created().empty()) << "a sandbox was made for a workspace that cannot be";
}

TEST_F(WorkspaceCheckoutsTest, ACheckoutTheGuestCannotTakeRemovesItsSandbox) {
    write("blocker", "a file where the tree's directory should be");
    tree += "/blocker/tree";
    EXPECT_ANY_THROW(checkout());
    ASSERT_EQ(sandboxes.created().size(), 1u);
    EXPECT_EQ(sandboxes.destroyed(), sandboxes.created());
    EXPECT_FALSE(records.has(sandboxes.created()[0])) << "no record of a workspace never written";
    EXPECT_TRUE(sandboxes.events("workspace.cloned").empty());
}

TEST_F(WorkspaceCheckoutsTest, AResetPutsTheBaseBackWithoutItsIgnoredFilesUnlessAsked) {
    auto id = checkout();
    write("src/app.py", "broken\n");
    write("stray.txt", "new\n");
    write("build/out.o", "ignored output\n");
    fs::remove(tree + "/README.md");
    fs::remove_all(tree + "/.git");
    auto r = records.load("t1", id);
    r.head = std::string(40, 'f');
    records.save(id, "t1", r);

    checkouts.reset("t1", id, false);
    EXPECT_EQ(read("src/app.py"), "def add(a, b):\n    return a + b\n");
    EXPECT_TRUE(fs::exists(tree + "/README.md"));
    EXPECT_FALSE(fs::exists(tree + "/stray.txt"));
    EXPECT_EQ(read(".git/HEAD"), "ref: refs/heads/agent/t\n");
    EXPECT_TRUE(fs::exists(tree + "/build/out.o")) << "ignored files stay unless asked";
    EXPECT_EQ(records.load("t1", id).head, "") << "nothing is left to push";
    auto reset = sandboxes.events("workspace.reset");
    ASSERT_EQ(reset.size(), 1u);
    EXPECT_EQ(reset[0].data["previous_head"], std::string(40, 'f'));

    checkouts.reset("t1", id, true);
    EXPECT_FALSE(fs::exists(tree + "/build/out.o"));
}

TEST_F(WorkspaceCheckoutsTest, AStoppedSandboxOrAnotherTenantsCannotBeReset) {
    auto id = checkout();
    EXPECT_EQ(codeOf([&] { checkouts.reset("t2", id, false); }), ErrorCode::not_found);
    sandboxes.pause(id);
    EXPECT_EQ(codeOf([&] { checkouts.reset("t1", id, false); }), ErrorCode::conflict);
}

TEST(WorkspaceGitmodules, OnlySubmoduleSectionsWithTheirPathAndUrlAreRead) {
    auto mods = WorkspaceCheckouts::parseGitmodules(
        "[submodule \"lib\"]\n\tpath = vendor/lib\n\turl = \"../lib.git\"\n"
        "[include]\n\tpath = /etc/passwd\n"
        "; comment\n[submodule \"x\"]\nURL=https://h/x.git\n");
    ASSERT_EQ(mods.size(), 2u);
    EXPECT_EQ(mods["lib"], (std::pair<std::string, std::string>{"vendor/lib", "../lib.git"}));
    EXPECT_EQ(mods["x"], (std::pair<std::string, std::string>{"", "https://h/x.git"}));
    EXPECT_TRUE(WorkspaceCheckouts::validBranch("agent/task-1"));
    for (const char* bad : {"-x", "HEAD", "a..b", "a b", "a~1", ""})
        EXPECT_FALSE(WorkspaceCheckouts::validBranch(bad)) << bad;
}

}  // namespace
}  // namespace airlock::workspace

#include "workspace/WorkspaceChanges.hpp"

#include <future>

#include "unit/workspace/WorkspaceFixture.hpp"

namespace airlock::workspace {
namespace {
namespace fs = std::filesystem;
using test::codeOf;

class WorkspaceChangesTest : public test::WorkspaceFixture {
  protected:
    std::vector<std::string> paths(const std::vector<ChangedFile>& files) {
        std::vector<std::string> out;
        for (const auto& f : files) out.push_back(f.path);
        return out;
    }
};

TEST_F(WorkspaceChangesTest, TheDiffIsTheGuestsFilesAgainstTheBaseWhateverItsGitSays) {
    auto id = checkout();
    auto clean = changes.diff("t1", id);
    EXPECT_TRUE(clean.diff.files.empty()) << clean.diff.patch;
    EXPECT_EQ(clean.baseCommit, server.revParse("demo.git", "main"));

    write("src/app.py", "def add(a, b):\n    return a - b\n");
    write("NEW.md", "new\n");
    write("build/ignored.o", "not part of the tree\n");
    fs::remove(tree + "/README.md");
    // The agent's own .git says nothing changed; the host does not ask it.
    fs::remove_all(tree + "/.git");
    auto d = changes.diff("t1", id);
    EXPECT_EQ(paths(d.diff.files), (std::vector<std::string>{"NEW.md", "README.md", "src/app.py"}));
    EXPECT_NE(d.diff.patch.find("+    return a - b"), std::string::npos) << d.diff.patch;
    EXPECT_EQ(d.diff.patch, changes.diffPatch("t1", id));
    auto looked = sandboxes.events("workspace.diffed");
    ASSERT_EQ(looked.size(), 3u) << "every look at the diff is recorded";
    EXPECT_EQ(looked.back().data["tree"], d.tree);
    EXPECT_EQ(changes.info("t1", id).changedFiles, std::optional<std::size_t>(3));
}

TEST_F(WorkspaceChangesTest, ACommitFollowsTheLastOneAndNeedsAChange) {
    auto id = checkout();
    std::string base = server.revParse("demo.git", "main");
    EXPECT_EQ(codeOf([&] { changes.commit("t1", id, "nothing", "A", "a@example.com"); }),
              ErrorCode::conflict);
    write("src/app.py", "one\n");
    auto first = changes.commit("t1", id, "first", "Agent", "agent@example.com");
    EXPECT_EQ(first.parent, base);
    EXPECT_EQ(first.branch, "agent/t");
    EXPECT_EQ(records.load("t1", id).head, first.commit);
    EXPECT_EQ(codeOf([&] { changes.commit("t1", id, "again", "A", "a@example.com"); }),
              ErrorCode::conflict)
        << "the tree is the head's";
    write("src/app.py", "two\n");
    auto second = changes.commit("t1", id, "second", "Agent", "agent@example.com");
    EXPECT_EQ(second.parent, first.commit);
    auto committed = sandboxes.events("workspace.committed");
    ASSERT_EQ(committed.size(), 2u);
    EXPECT_EQ(committed[1].data["commit"], second.commit);
    EXPECT_EQ(committed[1].data["tree"], second.tree);
}

// A call waiting for the workspace's lock reads the record once it has it:
// a commit queued behind a reset builds on the base, not on the head the
// reset dropped.
TEST_F(WorkspaceChangesTest, ACallWaitingForTheLockReadsTheRecordAsItIsThen) {
    auto id = checkout();
    write("src/app.py", "first\n");
    auto first = changes.commit("t1", id, "first", "A", "a@example.com");
    write("src/app.py", "second\n");
    std::future<WorkspaceCommit> second;
    {
        auto held = records.hold(id);
        second = std::async(std::launch::async, [&] {
            return changes.commit("t1", id, "second", "A", "a@example.com");
        });
        // Give it the time to reach the lock (a bound: arriving later only
        // makes the test easier), then drop the head as a reset would.
        EXPECT_EQ(second.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
        auto r = records.load("t1", id);
        r.head.clear();
        records.save(id, "t1", r);
    }
    auto c = second.get();
    EXPECT_EQ(c.parent, server.revParse("demo.git", "main")) << "built on a head that was gone";
    EXPECT_NE(c.parent, first.commit);
}

TEST_F(WorkspaceChangesTest, ChangesOutsideAnEnforcedScopeAreShownButNeverCommitted) {
    auto r = request();
    r.workspace->writeScope = {"src/**"};
    r.workspace->enforceScope = true;
    auto id = checkout(r);
    write("src/app.py", "in scope\n");
    write("docs/out.md", "out of scope\n");
    auto d = changes.diff("t1", id);
    EXPECT_EQ(d.diff.outOfScope, std::vector<std::string>{"docs/out.md"});
    EXPECT_EQ(codeOf([&] { changes.commit("t1", id, "m", "A", "a@example.com"); }),
              ErrorCode::conflict);
    fs::remove_all(tree + "/docs");
    EXPECT_NO_THROW(changes.commit("t1", id, "m", "A", "a@example.com"));
}

TEST_F(WorkspaceChangesTest, TheEvidenceViewHoldsTheWantedFilesBeforeAndAfter) {
    auto id = checkout();
    write("package.json", "{\"name\": \"demo\", \"version\": \"2.0.0\"}\n");
    write("src/app.py", "changed\n");
    auto view = changes.evidenceView("t1", id, [](const std::string& p) {
        return p == "package.json";
    });
    ASSERT_TRUE(view.has_value());
    EXPECT_EQ(view->baseCommit, server.revParse("demo.git", "main"));
    EXPECT_EQ(view->repo, server.base() + "/demo.git");
    EXPECT_EQ(view->files.size(), 2u);
    ASSERT_EQ(view->contents.size(), 1u) << "only what was asked for";
    EXPECT_NE(view->contents["package.json"].first.find("1.0.0"), std::string::npos);
    EXPECT_NE(view->contents["package.json"].second.find("2.0.0"), std::string::npos);
    EXPECT_NE(view->gitattributes.find("linguist-generated"), std::string::npos);
    EXPECT_FALSE(view->finalCommit) << "no host commit holds this tree";
    auto c = changes.commit("t1", id, "m", "A", "a@example.com");
    view = changes.evidenceView("t1", id, [](const std::string&) { return false; });
    EXPECT_EQ(view->finalCommit, std::optional<std::string>(c.commit));
    EXPECT_EQ(view->finalTree, c.tree);

    auto bare = sandboxes.create("t1", CreateSandboxRequest{}).id;
    EXPECT_FALSE(changes.evidenceView("t1", bare, [](const std::string&) { return true; }));
}

TEST_F(WorkspaceChangesTest, AFileLargerThanTheCapIsRefusedNotRead) {
    config.maxFileBytes = 1024;
    auto id = checkout();
    write("big.bin", std::string(4096, 'x'));
    EXPECT_EQ(codeOf([&] { changes.diff("t1", id); }), ErrorCode::payload_too_large);
}

}  // namespace
}  // namespace airlock::workspace

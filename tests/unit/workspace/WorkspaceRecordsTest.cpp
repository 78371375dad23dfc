#include "workspace/WorkspaceRecords.hpp"

#include <gtest/gtest.h>

#include <future>

#include "store/Database.hpp"
#include "support/FakeWorkspaceSandboxes.hpp"
#include "support/TestEnv.hpp"

namespace airlock::workspace {
namespace {
using test::codeOf;

class WorkspaceRecordsTest : public ::testing::Test {
  protected:
    WorkspaceRecordsTest() {
        config.dataDir = dir.path() + "/data";
        mirrors = std::make_unique<GitMirrors>(config, nullptr);
        records = std::make_unique<WorkspaceRecords>(store, sandboxes, *mirrors);
        id = sandboxes.create("t1", CreateSandboxRequest{}).id;
    }
    WorkspaceRecord scoped() const {
        WorkspaceRecord r;
        r.repo = "https://git.example/org/app.git";
        r.path = "/workspace";
        r.writeScope = {"src/**"};
        r.enforceScope = true;
        return r;
    }

    test::TempDir dir;
    test::FakeWorkspaceSandboxes sandboxes;
    Database db{dir.path() + "/state.db"};
    WorkspaceStore store{db};
    WorkspaceConfig config;
    std::unique_ptr<GitMirrors> mirrors;
    std::unique_ptr<WorkspaceRecords> records;
    std::string id;
};

TEST_F(WorkspaceRecordsTest, ARecordComesBackAsSavedWithItsSubmodulesMirrorsFilledIn) {
    WorkspaceRecord r = scoped();
    r.baseRef = "main";
    r.baseCommit = std::string(40, 'a');
    r.branch = "agent/t";
    r.credential = "fx";
    r.head = std::string(40, 'b');
    r.submodules = {{"lib", "vendor/lib", "https://git.example/org/lib.git", std::string(40, 'c'), ""}};
    r.skipped = {{"x", "vendor/x", "https://other.example/x.git", std::string(40, 'd'), ""}};
    r.warnings = {"submodule vendor/x was skipped"};
    records->save(id, "t1", r);

    auto back = records->load("t1", id);
    EXPECT_EQ(back.toJson(), r.toJson());
    ASSERT_EQ(back.submodules.size(), 1u);
    EXPECT_EQ(back.submodules[0].mirrorPath,
              mirrors->mirrorPath("t1", RemoteUrl::parse("https://git.example/org/lib.git")));
    EXPECT_TRUE(records->has(id));
    EXPECT_EQ(records->urlsInUse(),
              (std::set<std::string>{"https://git.example/org/app.git",
                                     "https://git.example/org/lib.git"}))
        << "a skipped submodule has no mirror to keep";
}

TEST_F(WorkspaceRecordsTest, AnotherTenantsSandboxOrOneWithoutAWorkspaceIsNotFound) {
    records->save(id, "t1", scoped());
    EXPECT_EQ(codeOf([&] { records->load("t2", id); }), ErrorCode::not_found);
    auto bare = sandboxes.create("t1", CreateSandboxRequest{}).id;
    EXPECT_EQ(codeOf([&] { records->load("t1", bare); }), ErrorCode::not_found);
    EXPECT_FALSE(records->has(bare));
}

TEST_F(WorkspaceRecordsTest, ADamagedRecordIsAnInternalErrorAndRefusesEveryWrite) {
    store.put(id, "t1", "{not json");
    EXPECT_EQ(codeOf([&] { records->load("t1", id); }), ErrorCode::internal);
    auto sandbox = sandboxes.get("t1", id);
    EXPECT_EQ(codeOf([&] { records->checkWrite(sandbox, "/workspace/src/a.py"); }),
              ErrorCode::internal)
        << "the scope is never skipped because it could not be read";
    store.put(id, "t1", R"({"repo": 7})");
    EXPECT_EQ(codeOf([&] { records->stored(id); }), ErrorCode::internal);
}

TEST_F(WorkspaceRecordsTest, WritesAreJudgedAsTheGuestResolvesThePathAgainstTheEnforcedScope) {
    records->save(id, "t1", scoped());
    auto sandbox = sandboxes.get("t1", id);
    auto allowed = [&](const std::string& path) {
        try {
            records->checkWrite(sandbox, path);
            return true;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::forbidden) << path;
            return false;
        }
    };
    EXPECT_TRUE(allowed("/workspace/src/app.py"));
    EXPECT_FALSE(allowed("/workspace/docs/x.md"));
    EXPECT_FALSE(allowed("/workspace/src/../docs/x.md")) << "dot-dot climbs out";
    EXPECT_FALSE(allowed("/workspace//./docs/x.md"));
    EXPECT_TRUE(allowed("/workspace/.git/config")) << "its own .git is the agent's";
    EXPECT_TRUE(allowed("/tmp/x")) << "outside the repository";
    EXPECT_TRUE(allowed("/workspace-other/x")) << "a sibling is not inside it";

    auto unenforced = scoped();
    unenforced.enforceScope = false;
    records->save(id, "t1", unenforced);
    EXPECT_TRUE(allowed("/workspace/docs/x.md"));
}

TEST_F(WorkspaceRecordsTest, OneCallAtATimeHoldsASandboxsWorkspace) {
    auto held = records->hold(id);
    auto second = std::async(std::launch::async, [&] { records->hold(id); });
    auto another = std::async(std::launch::async, [&] { records->hold("sb-other"); });
    EXPECT_EQ(another.wait_for(std::chrono::seconds(10)), std::future_status::ready)
        << "another sandbox's workspace is not held up";
    EXPECT_EQ(second.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
    held.lock.unlock();
    EXPECT_EQ(second.wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

}  // namespace
}  // namespace airlock::workspace

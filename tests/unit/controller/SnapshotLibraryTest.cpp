// Snapshot files and records without a VM: real SQLite stores, real files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "controller/SnapshotLibrary.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "store/Database.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
namespace fs = std::filesystem;
using test::codeOf;

class SnapshotLibraryTest : public ::testing::Test {
  protected:
    test::TempDir dir;
    Database db{dir.path() + "/state.db"};
    SnapshotStore snapshots{db};
    SandboxStore sandboxes{db};
    WorkspaceStore workspaces{db};
    SnapshotLibrary library{dir.path(), snapshots, sandboxes, &workspaces};

    // A snapshot being taken: its record, and its files as the VM work left them.
    // `below`: the frozen layers its disk chain already read.
    SnapshotRecord taking(const std::string& tenant = "t1", bool disk = true,
                          const std::string& kind = "user", std::vector<std::string> below = {}) {
        SnapshotRecord s;
        s.id = newId("snap-");
        s.tenant = tenant;
        s.kind = kind;
        s.sourceSandbox = newId("sbx-");
        s.templateName = "minimal";
        s.templateDigest = "sha256:one";
        s.hasDisk = disk;
        if (disk) {
            s.layers = std::move(below);
            s.layers.push_back(s.id);
        }
        s.createdAt = "2026-12-02T00:00:00Z";
        snapshots.insert(s);
        fs::create_directories(library.dirOf(s));
        std::ofstream(library.statePath(s)) << "memory of " << s.id;
        if (disk) std::ofstream(library.layerPath(s)) << "layer of " << s.id;
        return s;
    }
    SnapshotRecord ready(const std::string& tenant = "t1", bool disk = true) {
        auto s = taking(tenant, disk);
        library.seal(s);
        return *snapshots.find(s.id);
    }
    // A sandbox whose disk chain reads these layers.
    std::string readerOf(std::vector<std::string> layers) {
        SandboxRecord r;
        r.id = newId("sbx-");
        r.tenant = "t1";
        r.layers = std::move(layers);
        sandboxes.insert(r);
        return r.id;
    }
};

TEST_F(SnapshotLibraryTest, SealVouchesForTheFilesAndVerifyHoldsThemToIt) {
    auto s = taking();
    auto size = library.seal(s);
    auto sealed = snapshots.find(s.id);
    ASSERT_TRUE(sealed);
    EXPECT_EQ(sealed->state, SnapshotState::ready);
    EXPECT_EQ(size, static_cast<std::int64_t>(fs::file_size(library.statePath(s)) +
                                              fs::file_size(library.layerPath(s))));
    EXPECT_EQ(sealed->sizeBytes, size);
    auto manifest = nlohmann::json::parse(sealed->manifestJson);
    EXPECT_EQ(manifest["files"].size(), 2u);
    EXPECT_EQ(manifest["source_sandbox"], s.sourceSandbox);
    EXPECT_TRUE(fs::exists(library.dirOf(s) + "/" + SnapshotLibrary::kManifestFile));
    EXPECT_EQ(fs::status(library.statePath(s)).permissions() & fs::perms::all,
              fs::perms::owner_read);
    EXPECT_NO_THROW(library.verify(*sealed));

    // A changed memory state is refused, as is a changed layer.
    fs::permissions(library.statePath(s), fs::perms::owner_write, fs::perm_options::add);
    std::ofstream(library.statePath(s), std::ios::app) << "tampered";
    EXPECT_EQ(codeOf([&] { library.verify(*sealed); }), ErrorCode::conflict);

    auto other = ready();
    EXPECT_NO_THROW(library.verify(other));
    std::ofstream(library.layerPath(other), std::ios::trunc)
        << "layer of snap-xxxxxxxxxxxxxxxxxxxx";
    EXPECT_EQ(codeOf([&] { library.verify(other); }), ErrorCode::conflict);

    // A record without a manifest, or reading a layer that is gone.
    auto bare = taking();
    EXPECT_EQ(codeOf([&] { library.verify(bare); }), ErrorCode::internal);
    auto chained = ready();
    chained.layers = {"snap-gonegonegonegonegone", chained.id};
    EXPECT_EQ(codeOf([&] { library.verify(chained); }), ErrorCode::internal);
}

TEST_F(SnapshotLibraryTest, ATenantSeesAndDeletesItsOwnReadySnapshotsOnly) {
    auto mine = ready("t1");
    auto theirs = ready("t2");
    auto warm = taking("_warm", false, "warm");
    library.seal(warm);
    auto busy = taking("t1");
    EXPECT_EQ(library.get("t1", mine.id).id, mine.id);
    EXPECT_EQ(codeOf([&] { library.get("t1", theirs.id); }), ErrorCode::not_found);
    EXPECT_EQ(codeOf([&] { library.get("t1", "snap-../../etc"); }), ErrorCode::not_found);
    EXPECT_EQ(library.list("t1").size(), 2u);  // mine, and the one being taken
    EXPECT_EQ(library.list(TenantScope::all()).size(), 3u) << "warm snapshots belong to no tenant";
    EXPECT_EQ(codeOf([&] { library.remove("t2", mine.id); }), ErrorCode::not_found);
    EXPECT_EQ(codeOf([&] { library.remove("t1", busy.id); }), ErrorCode::conflict);
    EXPECT_TRUE(snapshots.find(mine.id));
}

TEST_F(SnapshotLibraryTest, ADeletedSnapshotsLayerStaysUntilItsLastReaderGoes) {
    auto s = ready();
    auto clone = readerOf({s.id});
    workspaces.copy(s.sourceSandbox, s.id);
    library.remove("t1", s.id);
    EXPECT_EQ(codeOf([&] { library.get("t1", s.id); }), ErrorCode::not_found) << "hidden at once";
    EXPECT_TRUE(library.list("t1").empty());
    EXPECT_FALSE(fs::exists(library.statePath(s)));
    EXPECT_TRUE(fs::exists(library.layerPath(s))) << "a clone's disk still reads it";
    library.collect();
    EXPECT_TRUE(fs::exists(library.layerPath(s)));
    sandboxes.remove(clone);
    library.collect();
    EXPECT_FALSE(fs::exists(library.dirOf(s)));
    EXPECT_FALSE(snapshots.find(s.id));

    // A later snapshot's chain reads an earlier layer the same way.
    auto first = ready();
    auto second = taking("t1", true, "user", {first.id});
    library.seal(second);
    library.remove("t1", first.id);
    EXPECT_TRUE(fs::exists(library.layerPath(first)));
    library.remove("t1", second.id);
    EXPECT_FALSE(fs::exists(library.dirOf(first)));
    EXPECT_FALSE(fs::exists(library.dirOf(second)));
}

TEST_F(SnapshotLibraryTest, RecoveryAbandonsInterruptedSnapshotsAndOrphanDirectories) {
    auto kept = ready();
    auto read = taking();
    auto reader = readerOf({read.id});
    auto unread = taking();
    fs::create_directories(dir.path() + "/snapshots/snap-orphanorphanorphan");
    fs::create_directories(dir.path() + "/warm/snap-orphanorphanorph2");
    library.recover();
    EXPECT_EQ(snapshots.find(kept.id)->state, SnapshotState::ready);
    EXPECT_TRUE(fs::exists(library.statePath(kept)));
    auto half = snapshots.find(read.id);
    ASSERT_TRUE(half) << "a sandbox reads its layer";
    EXPECT_EQ(half->state, SnapshotState::deleted);
    EXPECT_FALSE(fs::exists(library.statePath(read)));
    EXPECT_TRUE(fs::exists(library.layerPath(read)));
    EXPECT_FALSE(snapshots.find(unread.id));
    EXPECT_FALSE(fs::exists(library.dirOf(unread)));
    EXPECT_FALSE(fs::exists(dir.path() + "/snapshots/snap-orphanorphanorphan"));
    EXPECT_FALSE(fs::exists(dir.path() + "/warm/snap-orphanorphanorph2"));
    sandboxes.remove(reader);
    library.collect();
    EXPECT_FALSE(fs::exists(library.dirOf(read)));
}

TEST_F(SnapshotLibraryTest, OnlyTheCurrentBuildsWarmSnapshotIsUsed) {
    TemplateInfo tmpl;
    tmpl.name = "minimal";
    tmpl.digest = "sha256:one";
    EXPECT_FALSE(library.warmFor(tmpl, "_warm"));
    auto warm = taking("_warm", false, "warm");
    EXPECT_FALSE(library.warmFor(tmpl, "_warm")) << "not ready yet";
    library.seal(warm);
    ASSERT_TRUE(library.warmFor(tmpl, "_warm"));
    EXPECT_EQ(library.warmFor(tmpl, "_warm")->id, warm.id);
    EXPECT_EQ(library.dirOf(warm), dir.path() + "/warm/" + warm.id);
    library.retireOldWarm(tmpl, "_warm");
    EXPECT_TRUE(library.warmFor(tmpl, "_warm")) << "the current build stays";
    tmpl.digest = "sha256:two";
    EXPECT_FALSE(library.warmFor(tmpl, "_warm"));
    library.retireOldWarm(tmpl, "_warm");
    EXPECT_EQ(snapshots.find(warm.id)->state, SnapshotState::deleted);
    library.collect();
    EXPECT_FALSE(fs::exists(library.dirOf(warm)));
}

}  // namespace
}  // namespace airlock

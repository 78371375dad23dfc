#include "store/VolumeStore.hpp"

#include <gtest/gtest.h>

#include "store/Database.hpp"
#include "store/SandboxStore.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

TEST(VolumeStore, VolumesAreEachTenantsOwnByName) {
    test::TempDir dir;
    Database db(dir.path() + "/state.db");
    VolumeStore store(db);
    VolumeRecord v;
    v.id = "vol-1";
    v.tenant = "acme";
    v.name = "cache";
    v.sizeBytes = 1ull << 30;
    EXPECT_TRUE(store.insert(v));
    v.id = "vol-2";
    EXPECT_FALSE(store.insert(v)) << "a second 'cache' for acme";
    v.tenant = "other";
    EXPECT_TRUE(store.insert(v));
    EXPECT_EQ(store.find("acme", "cache")->id, "vol-1");
    EXPECT_EQ(store.find("other", "cache")->id, "vol-2");
    EXPECT_FALSE(store.find("acme", "data"));
    store.updateSize("vol-1", 2ull << 30);
    EXPECT_EQ(store.findById("vol-1")->sizeBytes, 2ull << 30);
    EXPECT_EQ(store.list("acme").size(), 1u);
    EXPECT_EQ(store.all().size(), 2u);
    store.remove("vol-1");
    EXPECT_FALSE(store.find("acme", "cache"));
}

TEST(VolumeStore, ASandboxKeepsItsVolumesIdleRuleAndHibernation) {
    test::TempDir dir;
    Database db(dir.path() + "/state.db");
    SandboxStore sandboxes(db);
    SandboxRecord r;
    r.id = "sbx-1";
    r.tenant = "acme";
    r.state = SandboxState::running;
    r.volumesJson = R"([{"volume":"vol-1","name":"cache","path":"/mnt/cache","read_only":false}])";
    r.idleJson = R"({"after_s":5,"action":"hibernate"})";
    sandboxes.insert(r);
    sandboxes.updatePaused("sbx-1", SandboxState::paused, false, true, "idle");
    auto back = sandboxes.find("sbx-1");
    ASSERT_TRUE(back);
    EXPECT_EQ(back->volumesJson, r.volumesJson);
    EXPECT_EQ(back->idleJson, r.idleJson);
    EXPECT_TRUE(back->hibernated);
    EXPECT_EQ(back->pauseReason, "idle");
    EXPECT_EQ(back->state, SandboxState::paused);
    sandboxes.updatePaused("sbx-1", SandboxState::running, false);
    back = sandboxes.find("sbx-1");
    EXPECT_FALSE(back->hibernated);
    EXPECT_EQ(back->pauseReason, "");
}

}  // namespace
}  // namespace airlock

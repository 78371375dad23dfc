#include "store/TemplateStore.hpp"

#include <gtest/gtest.h>

#include "store/Database.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

TEST(TemplateStore, TemplatesAreEachTenantsOwnByNameAndTag) {
    test::TempDir dir;
    Database db(dir.path() + "/state.db");
    TemplateStore store(db);
    UserTemplateRecord t;
    t.tenant = "acme";
    t.name = "webapp";
    t.snapshotId = "snap-1";
    t.env = {{"A", "1"}};
    store.putTemplate(t);
    t.tag = "v2";
    t.snapshotId = "snap-2";
    store.putTemplate(t);
    EXPECT_EQ(store.findTemplate("acme", "webapp", "latest")->snapshotId, "snap-1");
    EXPECT_EQ(store.findTemplate("acme", "webapp", "v2")->env["A"], "1");
    EXPECT_FALSE(store.findTemplate("other", "webapp", "latest"));
    EXPECT_EQ(store.listTemplates("acme").size(), 2u);
    EXPECT_TRUE(store.removeTemplate("acme", "webapp", "latest"));
    EXPECT_FALSE(store.removeTemplate("acme", "webapp", "latest"));
    EXPECT_EQ(store.allTemplates().size(), 1u);
}

TEST(TemplateStore, ABuildKeepsWhyItFailed) {
    test::TempDir dir;
    Database db(dir.path() + "/state.db");
    TemplateStore store(db);
    TemplateBuildRecord b;
    b.id = "bld-1";
    b.tenant = "acme";
    b.name = "failapp";
    b.state = BuildState::building;
    store.putBuild(b);
    EXPECT_EQ(store.unfinishedBuilds().size(), 1u);
    b.state = BuildState::failed;
    b.failedStep = 1;
    b.failedCommand = "RUN exit 3";
    b.exitCode = 3;
    store.putBuild(b);
    auto back = store.findBuild("bld-1");
    ASSERT_TRUE(back);
    EXPECT_EQ(back->state, BuildState::failed);
    EXPECT_EQ(back->exitCode, 3);
    EXPECT_EQ(back->failedStep, 1u);
    EXPECT_TRUE(store.unfinishedBuilds().empty());
}

TEST(TemplateStore, LayersComeOldestUseFirst) {
    test::TempDir dir;
    Database db(dir.path() + "/state.db");
    TemplateStore store(db);
    store.putLayer({"acme", "k1", "snap-1", 10, 200});
    store.putLayer({"acme", "k2", "snap-2", 20, 100});
    auto all = store.listLayers();
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0].key, "k2");
    store.putLayer({"acme", "k2", "snap-2", 20, 300});  // used again
    EXPECT_EQ(store.listLayers()[0].key, "k1");
    store.removeLayer("acme", "k1");
    EXPECT_FALSE(store.findLayer("acme", "k1"));
}

}  // namespace
}  // namespace airlock

#include "store/GatedExecStore.hpp"

#include <gtest/gtest.h>

#include "support/TestEnv.hpp"

namespace airlock {
namespace {

GatedExec gated(const std::string& id, const std::string& approval) {
    GatedExec g;
    g.id = id;
    g.approvalId = approval;
    g.sandboxId = "sbx-aaaaaaaaaaaaaaaaaaaa";
    g.tenant = "t";
    g.requestJson = "{}";
    g.requestedAt = "2026-01-01T00:00:00Z";
    return g;
}

// What a restart interrupted: started pushes, found by their id prefix
// (the workspace service fails them at start-up).
TEST(GatedExecStore, RunningFindsStartedOnesByPrefixOnly) {
    test::TempDir dir;
    Database db(dir.path() + "/state.db");
    GatedExecStore store(db);
    store.insert(gated("psh-1", "apr-1"));
    store.insert(gated("psh-2", "apr-2"));
    store.insert(gated("ex-3", "apr-3"));
    ASSERT_TRUE(store.decide("psh-1", "running", "now", "me", "ok"));
    ASSERT_TRUE(store.decide("ex-3", "running", "now", "me", "ok"));
    auto running = store.running("psh-");
    ASSERT_EQ(running.size(), 1u);
    EXPECT_EQ(running[0].id, "psh-1");
    store.finish("psh-1", "failed", -1, "", "", "restarted");
    EXPECT_TRUE(store.running("psh-").empty());
    EXPECT_EQ(store.find("psh-1")->state, "failed");
    EXPECT_EQ(store.find("psh-2")->state, "pending_approval");
}

}  // namespace
}  // namespace airlock

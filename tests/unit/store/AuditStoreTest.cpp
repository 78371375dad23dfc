#include <gtest/gtest.h>

#include "store/AuditStore.hpp"
#include "store/SandboxStore.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

TEST(AuditStore, RetentionDropsOnlyDeletedSandboxesPastTheCutoff) {
    test::TempDir dir;
    Database db(dir.path() + "/state.db");
    SandboxStore sandboxes(db);  // retention asks which sandboxes still exist
    AuditStore audit(db);
    SandboxRecord live;
    live.id = "sbx-live";
    live.tenant = "t";
    live.createdAt = "2026-01-01T00:00:00Z";
    sandboxes.insert(live);
    audit.append({0, "sbx-live", "t", "2026-01-01T00:00:00Z", "sandbox.created", "{}"});
    audit.append({0, "sbx-old", "t", "2026-01-01T00:00:00Z", "sandbox.created", "{}"});
    audit.append({0, "sbx-old", "t", "2026-01-02T00:00:00Z", "sandbox.deleted", "{}"});
    audit.append({0, "sbx-recent", "t", "2026-01-01T00:00:00Z", "sandbox.created", "{}"});
    audit.append({0, "sbx-recent", "t", "2026-03-01T00:00:00Z", "sandbox.deleted", "{}"});

    EXPECT_EQ(audit.prune("2026-02-01T00:00:00Z"), 2);
    EXPECT_TRUE(audit.query("sbx-old", AuditQuery{}).empty())
        << "deleted, and its last event is past the cut-off";
    EXPECT_EQ(audit.query("sbx-live", AuditQuery{}).size(), 1u)
        << "a live sandbox keeps its history";
    EXPECT_EQ(audit.query("sbx-recent", AuditQuery{}).size(), 2u)
        << "deleted recently: still readable, whole";
    EXPECT_EQ(audit.prune("2026-02-01T00:00:00Z"), 0);
}

}  // namespace
}  // namespace airlock

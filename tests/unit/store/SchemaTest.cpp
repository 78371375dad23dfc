#include <gtest/gtest.h>
#include <sqlite3.h>

#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "store/ApiKeyStore.hpp"
#include "store/Database.hpp"
#include "store/SandboxStore.hpp"
#include "store/Schema.hpp"
#include "store/TenantScope.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

std::vector<std::string> columnsOf(Database& db, const std::string& table) {
    return db.all("SELECT name FROM pragma_table_info(?) ORDER BY cid", textColumn, table);
}

TEST(SchemaTest, ANewFileIsAtTheLatestVersionWithEveryTable) {
    test::TempDir dir;
    Database db(dir.path() + "/state.db");
    EXPECT_EQ(db.schemaVersion(), kLatestSchemaVersion);
    for (const char* table : {"sandboxes", "snapshots", "api_keys", "tenants", "audit",
                              "gated_execs", "ports", "evidence", "credentials", "workspaces"})
        EXPECT_FALSE(columnsOf(db, table).empty()) << table;
}

TEST(SchemaTest, ReopeningRunsNoStepTwice) {
    test::TempDir dir;
    {
        Database db(dir.path() + "/state.db");
        SandboxRecord r;
        r.id = "sbx-a";
        r.tenant = "t";
        r.templateName = "m";
        SandboxStore(db).insert(r);
    }
    Database again(dir.path() + "/state.db");
    EXPECT_EQ(again.schemaVersion(), kLatestSchemaVersion);
    EXPECT_EQ(SandboxStore(again).list(TenantScope::all()).size(), 1u);
}

TEST(SchemaTest, AFileFromBeforeVersioningGainsColumnsAndKeepsRows) {
    test::TempDir dir;
    const std::string path = dir.path() + "/state.db";
    {
        // The tables as the first releases made them, one store at a time.
        Database legacy(path, 0);
        legacy.exec(
            "CREATE TABLE sandboxes (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, template TEXT NOT "
            "NULL, state TEXT NOT NULL, vcpus INTEGER NOT NULL, memory_mib INTEGER NOT NULL, "
            "created_at TEXT NOT NULL, metadata TEXT NOT NULL, env TEXT NOT NULL, error TEXT NOT "
            "NULL DEFAULT '');"
            "INSERT INTO sandboxes VALUES ('sbx-old', 'acme', 'minimal', 'running', 2, 512, "
            "'2026-01-01T00:00:00Z', '{\"k\":\"v\"}', '{}', '');"
            "CREATE TABLE api_keys (key_hash TEXT PRIMARY KEY, tenant TEXT NOT NULL, label TEXT "
            "NOT NULL, created_at TEXT NOT NULL);"
            "INSERT INTO api_keys VALUES ('" +
            std::string(64, 'a') + "', 'admin', 'admin', '2026-01-01T00:00:00Z');");
        EXPECT_EQ(legacy.schemaVersion(), 0);
    }
    Database db(path);
    EXPECT_EQ(db.schemaVersion(), kLatestSchemaVersion);
    EXPECT_EQ(columnsOf(db, "sandboxes").back(), "pause_reason");

    auto sandbox = SandboxStore(db).find("sbx-old");
    ASSERT_TRUE(sandbox);
    EXPECT_EQ(sandbox->memoryMib, 512u);
    EXPECT_EQ(sandbox->metadataJson, "{\"k\":\"v\"}");
    EXPECT_TRUE(sandbox->layers.empty());  // the added column's default
    EXPECT_EQ(sandbox->onTimeout, "kill");
    EXPECT_EQ(sandbox->portAccess, "exposed");
    EXPECT_FALSE(sandbox->pausedWithoutMemory);
    EXPECT_FALSE(sandbox->autoResume);

    // Keys from before roles were the single admin key; they get an id.
    ApiKeyStore keys(db);
    auto all = keys.list(std::nullopt);
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].role, Role::admin);
    EXPECT_EQ(all[0].id.rfind("key-", 0), 0u);
    EXPECT_EQ(keys.liveAdmins(nowUnixSeconds()), 1u);

    // The tables it never had are there, with their indexes.
    EXPECT_FALSE(columnsOf(db, "evidence").empty());
    EXPECT_EQ(db.all("SELECT name FROM sqlite_master WHERE type = 'index' AND name = ?", textColumn,
                     "audit_sandbox")
                  .size(),
              1u);
}

TEST(SchemaTest, AFileFromANewerReleaseIsRefusedUntouched) {
    test::TempDir dir;
    const std::string path = dir.path() + "/state.db";
    {
        Database db(path);
        db.exec("PRAGMA user_version = " + std::to_string(kLatestSchemaVersion + 1));
    }
    try {
        Database db(path);
        FAIL() << "opened a newer file";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("newer airlockd"), std::string::npos) << e.what();
    }
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(raw, "PRAGMA user_version", -1, &st, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int(st, 0), kLatestSchemaVersion + 1);
    sqlite3_finalize(st);
    sqlite3_close(raw);
}

TEST(DatabaseTest, RunOneAndAllBindParametersInOrder) {
    test::TempDir dir;
    Database db(dir.path() + "/state.db");
    db.exec("CREATE TABLE t (a TEXT, b INTEGER)");
    EXPECT_EQ(db.run("INSERT INTO t VALUES (?, ?), (?, ?)", "x", 1, std::string("y"), 2u), 2);
    Database::Params none, one{std::string("y")};
    auto read = [](const Database::Statement& st) {
        return st.text(0) + std::to_string(st.integer(1));
    };
    EXPECT_EQ(db.all("SELECT a, b FROM t ORDER BY b", read, none),
              (std::vector<std::string>{"x1", "y2"}));
    EXPECT_EQ(db.all("SELECT a, b FROM t WHERE b > ? AND a = ?", read, 0, one),
              (std::vector<std::string>{"y2"}));
    EXPECT_EQ(db.one("SELECT a, b FROM t WHERE b = ?", read, 3), std::nullopt);
    EXPECT_EQ(db.run("DELETE FROM t WHERE a = ?", "x"), 1);
    EXPECT_THROW(db.run("SELECT nonsense FROM"), Error);
}

}  // namespace
}  // namespace airlock

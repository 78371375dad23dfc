#include "store/Schema.hpp"

#include <set>
#include <string>

#include "core/Error.hpp"
#include "store/Database.hpp"

namespace airlock {
namespace {

struct SchemaStep {
    int version;
    const char* sql;
};

// Step 1 is the schema as it stood when versioning began.
constexpr SchemaStep kSteps[] = {
    {1, R"sql(
CREATE TABLE sandboxes (
  id TEXT PRIMARY KEY, tenant TEXT NOT NULL, template TEXT NOT NULL, state TEXT NOT NULL,
  vcpus INTEGER NOT NULL, memory_mib INTEGER NOT NULL, created_at TEXT NOT NULL,
  metadata TEXT NOT NULL, env TEXT NOT NULL, error TEXT NOT NULL DEFAULT '',
  snapshot TEXT NOT NULL DEFAULT '', disk TEXT NOT NULL DEFAULT '',
  layers TEXT NOT NULL DEFAULT '[]', timeout_s INTEGER NOT NULL DEFAULT 0,
  on_timeout TEXT NOT NULL DEFAULT 'kill', expires_at INTEGER NOT NULL DEFAULT 0,
  policy TEXT NOT NULL DEFAULT '{}', secrets TEXT NOT NULL DEFAULT '',
  secret_names TEXT NOT NULL DEFAULT '[]', network TEXT NOT NULL DEFAULT '[]',
  qemu_uid INTEGER NOT NULL DEFAULT 0, disk_bytes INTEGER NOT NULL DEFAULT 0,
  packages TEXT NOT NULL DEFAULT '', task TEXT NOT NULL DEFAULT '',
  artifacts TEXT NOT NULL DEFAULT '[]', port_access TEXT NOT NULL DEFAULT 'exposed');
CREATE TABLE snapshots (
  id TEXT PRIMARY KEY, tenant TEXT NOT NULL, kind TEXT NOT NULL, source TEXT NOT NULL,
  template TEXT NOT NULL, template_digest TEXT NOT NULL, state TEXT NOT NULL,
  vcpus INTEGER NOT NULL, memory_mib INTEGER NOT NULL, has_disk INTEGER NOT NULL,
  layers TEXT NOT NULL, created_at TEXT NOT NULL, size_bytes INTEGER NOT NULL DEFAULT 0,
  manifest TEXT NOT NULL DEFAULT '{}');
CREATE TABLE api_keys (
  key_hash TEXT PRIMARY KEY, tenant TEXT NOT NULL, label TEXT NOT NULL,
  created_at TEXT NOT NULL, id TEXT NOT NULL DEFAULT '',
  role TEXT NOT NULL DEFAULT 'admin', expires_at INTEGER NOT NULL DEFAULT 0);
CREATE TABLE tenants (
  name TEXT PRIMARY KEY, quota TEXT NOT NULL, policy TEXT NOT NULL, network TEXT NOT NULL,
  updated_at TEXT NOT NULL, packages TEXT NOT NULL DEFAULT '');
CREATE TABLE audit (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, sandbox TEXT NOT NULL, tenant TEXT NOT NULL,
  at TEXT NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL);
CREATE INDEX audit_sandbox ON audit (sandbox, seq);
CREATE TABLE gated_execs (
  id TEXT PRIMARY KEY, approval_id TEXT UNIQUE NOT NULL, sandbox TEXT NOT NULL,
  tenant TEXT NOT NULL, request TEXT NOT NULL, command TEXT NOT NULL, class TEXT NOT NULL,
  reason TEXT NOT NULL, state TEXT NOT NULL, requested_at TEXT NOT NULL,
  expires_at INTEGER NOT NULL, decided_at TEXT NOT NULL DEFAULT '',
  decided_by TEXT NOT NULL DEFAULT '', decision_reason TEXT NOT NULL DEFAULT '',
  exit_code INTEGER NOT NULL DEFAULT -1, stdout TEXT NOT NULL DEFAULT '',
  stderr TEXT NOT NULL DEFAULT '', error TEXT NOT NULL DEFAULT '');
CREATE TABLE ports (
  sandbox_id TEXT NOT NULL, port INTEGER NOT NULL, token TEXT NOT NULL,
  created_at TEXT NOT NULL, PRIMARY KEY (sandbox_id, port));
CREATE TABLE evidence (
  id TEXT PRIMARY KEY, sandbox TEXT NOT NULL, tenant TEXT NOT NULL, created_at TEXT NOT NULL,
  kind TEXT NOT NULL, sha256 TEXT NOT NULL, size INTEGER NOT NULL, summary TEXT NOT NULL,
  expires_at INTEGER NOT NULL DEFAULT 0, review TEXT NOT NULL DEFAULT '');
CREATE INDEX evidence_sandbox ON evidence (sandbox);
CREATE TABLE credentials (
  tenant TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL, host TEXT NOT NULL,
  username TEXT NOT NULL, secret_sealed TEXT NOT NULL, known_hosts TEXT NOT NULL,
  created_at TEXT NOT NULL, PRIMARY KEY (tenant, name));
CREATE TABLE workspaces (owner TEXT PRIMARY KEY, tenant TEXT NOT NULL, json TEXT NOT NULL);
)sql"},
    // An approval binds the request it shows: its digest (SHA-256 over the
    // canonical request) and what the approver is shown of it.
    {2, R"sql(
ALTER TABLE gated_execs ADD COLUMN request_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE gated_execs ADD COLUMN shown TEXT NOT NULL DEFAULT '';
)sql"},
    // A credential's scope: the repository path prefixes it may be sent to
    // beyond the workspace's own repository ([] = that repository only).
    {3, R"sql(
ALTER TABLE credentials ADD COLUMN scope TEXT NOT NULL DEFAULT '[]';
)sql"},
    // A tenant's own name for a snapshot (E2B's snapshot names): alias and tag.
    {4, R"sql(
ALTER TABLE snapshots ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE snapshots ADD COLUMN tag TEXT NOT NULL DEFAULT '';
)sql"},
    // A pause that kept only the disk (E2B's memory: false): its VM is shut
    // off, and resuming boots it again. And E2B's auto-resume: a paused
    // sandbox resumes when traffic reaches it.
    {5, R"sql(
ALTER TABLE sandboxes ADD COLUMN paused_without_memory INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN auto_resume INTEGER NOT NULL DEFAULT 0;
)sql"},
    // Secrets a tenant defines once for all its sandboxes (injected at the
    // egress proxy), kept as their JSON record.
    {6, R"sql(
CREATE TABLE tenant_secrets (tenant TEXT NOT NULL, name TEXT NOT NULL, json TEXT NOT NULL,
  PRIMARY KEY (tenant, name));
)sql"},
    // Templates tenants build: the templates, their builds and the layer
    // cache (each a JSON record; the layer's last use as a column to order by).
    {7, R"sql(
CREATE TABLE user_templates (tenant TEXT NOT NULL, name TEXT NOT NULL, tag TEXT NOT NULL,
  json TEXT NOT NULL, PRIMARY KEY (tenant, name, tag));
CREATE TABLE template_builds (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT NOT NULL,
  json TEXT NOT NULL);
CREATE TABLE template_layers (tenant TEXT NOT NULL, key TEXT NOT NULL, json TEXT NOT NULL,
  last_used INTEGER NOT NULL, PRIMARY KEY (tenant, key));
)sql"},
    // Volumes (a JSON record each) and what sleeps: a sandbox's volumes and
    // idle rule, a hibernated pause (memory on disk, no VM) and why it was
    // paused; a snapshot's volumes, which its clones attach.
    {8, R"sql(
CREATE TABLE volumes (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT NOT NULL,
  json TEXT NOT NULL, UNIQUE (tenant, name));
ALTER TABLE sandboxes ADD COLUMN volumes TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN idle TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN hibernated INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN pause_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE snapshots ADD COLUMN volumes TEXT NOT NULL DEFAULT '';
ALTER TABLE tenants ADD COLUMN idle TEXT NOT NULL DEFAULT '';
)sql"},
};

static_assert(std::size(kSteps) == kLatestSchemaVersion, "one step per schema version");

struct TableInfo {
    std::string name;
    std::string sql;
};

struct ColumnInfo {
    std::string name;
    std::string type;
    bool notNull;
    std::string defaultSql;  // as written in the definition; "" = none
};

std::vector<TableInfo> objects(Database& db, const char* type) {
    return db.all(
        "SELECT name, sql FROM sqlite_master WHERE type = ? AND sql IS NOT NULL"
        " AND name NOT LIKE 'sqlite_%' ORDER BY name",
        [](const Database::Statement& st) {
            return TableInfo{st.text(0), st.text(1)};
        },
        type);
}

std::vector<ColumnInfo> columns(Database& db, const std::string& table) {
    return db.all(
        "SELECT name, type, \"notnull\", ifnull(dflt_value, '') FROM pragma_table_info(?)",
        [](const Database::Statement& st) {
            return ColumnInfo{st.text(0), st.text(1), st.integer(2) != 0, st.text(3)};
        },
        table);
}

// A file from before versioning: its stores made their tables one by one
// and added columns as releases brought them. Whatever step 1 has and the
// file lacks is added (every such column has a default), then it is at 1.
void adoptUnversioned(Database& db) {
    Database reference(":memory:", 1);
    std::set<std::string> present;
    for (const auto& t : objects(db, "table")) present.insert(t.name);
    std::string sql;
    for (const auto& table : objects(reference, "table")) {
        if (!present.count(table.name)) {
            sql += table.sql + ";";
            continue;
        }
        std::set<std::string> have;
        for (const auto& c : columns(db, table.name)) have.insert(c.name);
        for (const auto& c : columns(reference, table.name)) {
            if (have.count(c.name)) continue;
            sql += "ALTER TABLE " + table.name + " ADD COLUMN " + c.name + " " + c.type +
                   (c.notNull ? " NOT NULL" : "") +
                   (c.defaultSql.empty() ? "" : " DEFAULT " + c.defaultSql) + ";";
        }
    }
    for (const auto& index : objects(reference, "index")) {
        // "CREATE INDEX name ON ..." as sqlite_master keeps it.
        sql += "CREATE INDEX IF NOT EXISTS" + index.sql.substr(std::string("CREATE INDEX").size()) +
               ";";
    }
    // Keys from before roles had no id.
    sql += "UPDATE api_keys SET id = 'key-' || lower(hex(randomblob(10))) WHERE id = '';";
    sql += "PRAGMA user_version = 1;";
    db.exec(sql);
}

}  // namespace

void bringSchemaUpTo(Database& db, int version) {
    // One transaction, taken before the version is read: two daemons
    // opening one file together run each step once.
    db.exec("BEGIN IMMEDIATE");
    try {
        int current = db.schemaVersion();
        if (current > kLatestSchemaVersion)
            throw Error(ErrorCode::internal,
                        "the database is from a newer airlockd (schema version " +
                            std::to_string(current) + "; this one knows up to " +
                            std::to_string(kLatestSchemaVersion) + ")");
        if (current == 0 && version >= 1 && !objects(db, "table").empty()) {
            adoptUnversioned(db);
            current = 1;
        }
        for (const auto& step : kSteps) {
            if (step.version <= current || step.version > version) continue;
            db.exec(step.sql);
            db.exec("PRAGMA user_version = " + std::to_string(step.version));
        }
        db.exec("COMMIT");
    } catch (...) {
        // SQLite may have rolled back on its own (disk full): the first
        // error is the one to report.
        try {
            db.exec("ROLLBACK");
        } catch (...) {
        }
        throw;
    }
}

}  // namespace airlock

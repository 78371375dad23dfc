#include "store/SandboxStore.hpp"

#include <sqlite3.h>

#include "core/Error.hpp"

namespace airlock {

std::string sandboxStateName(SandboxState s) {
    switch (s) {
        case SandboxState::creating:
            return "creating";
        case SandboxState::running:
            return "running";
        case SandboxState::paused:
            return "paused";
        case SandboxState::stopped:
            return "stopped";
        case SandboxState::error:
            return "error";
        case SandboxState::deleting:
            return "deleting";
    }
    return "error";
}

SandboxState parseSandboxState(const std::string& s) {
    if (s == "creating") return SandboxState::creating;
    if (s == "running") return SandboxState::running;
    if (s == "paused") return SandboxState::paused;
    if (s == "stopped") return SandboxState::stopped;
    if (s == "deleting") return SandboxState::deleting;
    return SandboxState::error;
}

namespace {
constexpr const char* kColumns =
    "id, tenant, template, state, vcpus, memory_mib, created_at, metadata, env, error, snapshot, "
    "disk, layers,"
    " timeout_s, on_timeout, expires_at, policy, secrets, secret_names, network, qemu_uid, "
    "disk_bytes, packages, task, artifacts, port_access";

SandboxRecord readRow(Database::Statement& st) {
    SandboxRecord r;
    r.id = st.text(0);
    r.tenant = st.text(1);
    r.templateName = st.text(2);
    r.state = parseSandboxState(st.text(3));
    r.vcpus = static_cast<unsigned>(st.integer(4));
    r.memoryMib = static_cast<unsigned>(st.integer(5));
    r.createdAt = st.text(6);
    r.metadataJson = st.text(7);
    r.envJson = st.text(8);
    r.error = st.text(9);
    r.snapshotId = st.text(10);
    r.disk = st.text(11);
    r.layersJson = st.text(12);
    r.timeoutS = st.integer(13);
    r.onTimeout = st.text(14);
    r.expiresAt = st.integer(15);
    r.policyJson = st.text(16);
    r.secretsSealed = st.text(17);
    r.secretNamesJson = st.text(18);
    r.networkJson = st.text(19);
    r.qemuUid = st.integer(20);
    r.diskBytes = static_cast<std::uint64_t>(st.integer(21));
    r.packagesJson = st.text(22);
    r.taskJson = st.text(23);
    r.artifactsJson = st.text(24);
    r.portAccess = st.text(25);
    return r;
}
}  // namespace

SandboxStore::SandboxStore(Database& db) : db_(db) {
    db_.exec(
        "CREATE TABLE IF NOT EXISTS sandboxes ("
        " id TEXT PRIMARY KEY, tenant TEXT NOT NULL, template TEXT NOT NULL, state TEXT NOT NULL,"
        " vcpus INTEGER NOT NULL, memory_mib INTEGER NOT NULL, created_at TEXT NOT NULL,"
        " metadata TEXT NOT NULL, env TEXT NOT NULL, error TEXT NOT NULL DEFAULT '')");
    // Columns added after the first release; a data dir from then gains them.
    db_.addColumnIfMissing("sandboxes", "snapshot TEXT NOT NULL DEFAULT ''");
    db_.addColumnIfMissing("sandboxes", "disk TEXT NOT NULL DEFAULT ''");
    db_.addColumnIfMissing("sandboxes", "layers TEXT NOT NULL DEFAULT '[]'");
    db_.addColumnIfMissing("sandboxes", "timeout_s INTEGER NOT NULL DEFAULT 0");
    db_.addColumnIfMissing("sandboxes", "on_timeout TEXT NOT NULL DEFAULT 'kill'");
    db_.addColumnIfMissing("sandboxes", "expires_at INTEGER NOT NULL DEFAULT 0");
    db_.addColumnIfMissing("sandboxes", "policy TEXT NOT NULL DEFAULT '{}'");
    db_.addColumnIfMissing("sandboxes", "secrets TEXT NOT NULL DEFAULT ''");
    db_.addColumnIfMissing("sandboxes", "secret_names TEXT NOT NULL DEFAULT '[]'");
    db_.addColumnIfMissing("sandboxes", "network TEXT NOT NULL DEFAULT '[]'");
    db_.addColumnIfMissing("sandboxes", "qemu_uid INTEGER NOT NULL DEFAULT 0");
    db_.addColumnIfMissing("sandboxes", "disk_bytes INTEGER NOT NULL DEFAULT 0");
    db_.addColumnIfMissing("sandboxes", "packages TEXT NOT NULL DEFAULT ''");
    db_.addColumnIfMissing("sandboxes", "task TEXT NOT NULL DEFAULT ''");
    db_.addColumnIfMissing("sandboxes", "artifacts TEXT NOT NULL DEFAULT '[]'");
    db_.addColumnIfMissing("sandboxes", "port_access TEXT NOT NULL DEFAULT 'exposed'");
}

void SandboxStore::updateNetwork(const std::string& id, const std::string& networkJson) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "UPDATE sandboxes SET network = ? WHERE id = ?");
        st.bind(1, networkJson).bind(2, id);
        st.step();
    });
}

void SandboxStore::updateDisk(const std::string& id, const std::string& disk,
                              const std::string& layersJson) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "UPDATE sandboxes SET disk = ?, layers = ? WHERE id = ?");
        st.bind(1, disk).bind(2, layersJson).bind(3, id);
        st.step();
    });
}

void SandboxStore::updateTimeout(const std::string& id, std::int64_t timeoutS,
                                 std::int64_t expiresAt) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db,
                               "UPDATE sandboxes SET timeout_s = ?, expires_at = ? WHERE id = ?");
        st.bind(1, timeoutS).bind(2, expiresAt).bind(3, id);
        st.step();
    });
}

void SandboxStore::insert(const SandboxRecord& r) { write(r, false); }
void SandboxStore::replace(const SandboxRecord& r) { write(r, true); }

void SandboxStore::write(const SandboxRecord& r, bool replace) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(
            db, std::string(replace ? "INSERT OR REPLACE" : "INSERT") + " INTO sandboxes (" +
                    kColumns + ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
        st.bind(1, r.id)
            .bind(2, r.tenant)
            .bind(3, r.templateName)
            .bind(4, sandboxStateName(r.state));
        st.bind(5, std::int64_t(r.vcpus)).bind(6, std::int64_t(r.memoryMib)).bind(7, r.createdAt);
        st.bind(8, r.metadataJson).bind(9, r.envJson).bind(10, r.error);
        st.bind(11, r.snapshotId).bind(12, r.disk).bind(13, r.layersJson).bind(14, r.timeoutS);
        st.bind(15, r.onTimeout)
            .bind(16, r.expiresAt)
            .bind(17, r.policyJson)
            .bind(18, r.secretsSealed);
        st.bind(19, r.secretNamesJson)
            .bind(20, r.networkJson)
            .bind(21, r.qemuUid)
            .bind(22, static_cast<std::int64_t>(r.diskBytes))
            .bind(23, r.packagesJson)
            .bind(24, r.taskJson)
            .bind(25, r.artifactsJson)
            .bind(26, r.portAccess);
        st.step();
    });
}

void SandboxStore::updateState(const std::string& id, SandboxState state,
                               const std::string& error) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "UPDATE sandboxes SET state = ?, error = ? WHERE id = ?");
        st.bind(1, sandboxStateName(state)).bind(2, error).bind(3, id);
        st.step();
    });
}

void SandboxStore::remove(const std::string& id) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "DELETE FROM sandboxes WHERE id = ?");
        st.bind(1, id);
        st.step();
    });
}

std::optional<SandboxRecord> SandboxStore::find(const std::string& id) {
    return db_.locked([&](sqlite3* db) -> std::optional<SandboxRecord> {
        Database::Statement st(db,
                               std::string("SELECT ") + kColumns + " FROM sandboxes WHERE id = ?");
        st.bind(1, id);
        if (!st.step()) return std::nullopt;
        return readRow(st);
    });
}

std::vector<SandboxRecord> SandboxStore::list(const TenantScope& scope) {
    return db_.locked([&](sqlite3* db) {
        std::string sql = std::string("SELECT ") + kColumns + " FROM sandboxes";
        if (!scope.isAll()) sql += " WHERE tenant = ?";
        sql += " ORDER BY created_at, id";
        Database::Statement st(db, sql);
        if (!scope.isAll()) st.bind(1, scope.tenant());
        std::vector<SandboxRecord> out;
        while (st.step()) out.push_back(readRow(st));
        return out;
    });
}

}  // namespace airlock

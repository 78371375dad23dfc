#include "store/SnapshotStore.hpp"

#include <sqlite3.h>

namespace airlock {

std::string snapshotStateName(SnapshotState s) {
    switch (s) {
        case SnapshotState::creating: return "creating";
        case SnapshotState::ready: return "ready";
        case SnapshotState::deleted: return "deleted";
    }
    return "deleted";
}

namespace {
constexpr const char* kColumns =
    "id, tenant, kind, source, template, template_digest, state, vcpus, memory_mib, has_disk, layers, created_at,"
    " size_bytes, manifest";

SnapshotState parseState(const std::string& s) {
    if (s == "creating") return SnapshotState::creating;
    if (s == "ready") return SnapshotState::ready;
    return SnapshotState::deleted;
}

SnapshotRecord readRow(Database::Statement& st) {
    SnapshotRecord r;
    r.id = st.text(0);
    r.tenant = st.text(1);
    r.kind = st.text(2);
    r.sourceSandbox = st.text(3);
    r.templateName = st.text(4);
    r.templateDigest = st.text(5);
    r.state = parseState(st.text(6));
    r.vcpus = static_cast<unsigned>(st.integer(7));
    r.memoryMib = static_cast<unsigned>(st.integer(8));
    r.hasDisk = st.integer(9) != 0;
    r.layersJson = st.text(10);
    r.createdAt = st.text(11);
    r.sizeBytes = st.integer(12);
    r.manifestJson = st.text(13);
    return r;
}
}  // namespace

SnapshotStore::SnapshotStore(Database& db) : db_(db) {
    db_.exec(
        "CREATE TABLE IF NOT EXISTS snapshots ("
        " id TEXT PRIMARY KEY, tenant TEXT NOT NULL, kind TEXT NOT NULL, source TEXT NOT NULL,"
        " template TEXT NOT NULL, template_digest TEXT NOT NULL, state TEXT NOT NULL, vcpus INTEGER NOT NULL,"
        " memory_mib INTEGER NOT NULL, has_disk INTEGER NOT NULL, layers TEXT NOT NULL, created_at TEXT NOT NULL,"
        " size_bytes INTEGER NOT NULL DEFAULT 0, manifest TEXT NOT NULL DEFAULT '{}')");
}

void SnapshotStore::insert(const SnapshotRecord& r) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, std::string("INSERT INTO snapshots (") + kColumns +
                                       ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
        st.bind(1, r.id).bind(2, r.tenant).bind(3, r.kind).bind(4, r.sourceSandbox).bind(5, r.templateName);
        st.bind(6, r.templateDigest).bind(7, snapshotStateName(r.state)).bind(8, std::int64_t(r.vcpus));
        st.bind(9, std::int64_t(r.memoryMib)).bind(10, std::int64_t(r.hasDisk ? 1 : 0)).bind(11, r.layersJson);
        st.bind(12, r.createdAt).bind(13, r.sizeBytes).bind(14, r.manifestJson);
        st.step();
    });
}

void SnapshotStore::markReady(const std::string& id, std::int64_t sizeBytes, const std::string& manifestJson) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "UPDATE snapshots SET state = 'ready', size_bytes = ?, manifest = ? WHERE id = ?");
        st.bind(1, sizeBytes).bind(2, manifestJson).bind(3, id);
        st.step();
    });
}

void SnapshotStore::updateState(const std::string& id, SnapshotState state) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "UPDATE snapshots SET state = ? WHERE id = ?");
        st.bind(1, snapshotStateName(state)).bind(2, id);
        st.step();
    });
}

void SnapshotStore::remove(const std::string& id) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "DELETE FROM snapshots WHERE id = ?");
        st.bind(1, id);
        st.step();
    });
}

std::optional<SnapshotRecord> SnapshotStore::find(const std::string& id) {
    return db_.locked([&](sqlite3* db) -> std::optional<SnapshotRecord> {
        Database::Statement st(db, std::string("SELECT ") + kColumns + " FROM snapshots WHERE id = ?");
        st.bind(1, id);
        if (!st.step()) return std::nullopt;
        return readRow(st);
    });
}

std::vector<SnapshotRecord> SnapshotStore::list(const TenantScope& scope) {
    return db_.locked([&](sqlite3* db) {
        std::string sql = std::string("SELECT ") + kColumns + " FROM snapshots";
        if (!scope.isAll()) sql += " WHERE tenant = ?";
        sql += " ORDER BY created_at, id";
        Database::Statement st(db, sql);
        if (!scope.isAll()) st.bind(1, scope.tenant());
        std::vector<SnapshotRecord> out;
        while (st.step()) out.push_back(readRow(st));
        return out;
    });
}

}  // namespace airlock

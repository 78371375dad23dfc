#include "store/SnapshotStore.hpp"

#include <algorithm>

#include "store/StringList.hpp"

namespace airlock {

std::string snapshotStateName(SnapshotState s) {
    switch (s) {
        case SnapshotState::creating:
            return "creating";
        case SnapshotState::ready:
            return "ready";
        case SnapshotState::deleted:
            return "deleted";
    }
    return "deleted";
}

namespace {
constexpr const char* kSnapshotColumns =
    "id, tenant, kind, source, template, template_digest, state, vcpus, memory_mib, has_disk, "
    "layers, created_at,"
    " size_bytes, manifest, name, tag, volumes";

SnapshotState parseState(const std::string& s) {
    if (s == "creating") return SnapshotState::creating;
    if (s == "ready") return SnapshotState::ready;
    return SnapshotState::deleted;
}

SnapshotRecord readSnapshotRow(const Database::Statement& st) {
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
    r.layers = stringListFromColumn(st.text(10));
    r.createdAt = st.text(11);
    r.sizeBytes = st.integer(12);
    r.manifestJson = st.text(13);
    r.name = SnapshotName{st.text(14), st.text(15)};
    r.volumesJson = st.text(16);
    return r;
}
}  // namespace

SnapshotStore::SnapshotStore(Database& db) : db_(db) {}

void SnapshotStore::insert(const SnapshotRecord& r) {
    db_.run(std::string("INSERT INTO snapshots (") + kSnapshotColumns +
                ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            r.id, r.tenant, r.kind, r.sourceSandbox, r.templateName, r.templateDigest,
            snapshotStateName(r.state), r.vcpus, r.memoryMib, r.hasDisk ? 1 : 0,
            stringListColumn(r.layers), r.createdAt, r.sizeBytes, r.manifestJson, r.name.alias,
            r.name.tag, r.volumesJson);
}

void SnapshotStore::markReady(const std::string& id, std::int64_t sizeBytes,
                              const std::string& manifestJson) {
    db_.run("UPDATE snapshots SET state = 'ready', size_bytes = ?, manifest = ? WHERE id = ?",
            sizeBytes, manifestJson, id);
}

void SnapshotStore::updateState(const std::string& id, SnapshotState state) {
    db_.run("UPDATE snapshots SET state = ? WHERE id = ?", snapshotStateName(state), id);
}

void SnapshotStore::remove(const std::string& id) {
    db_.run("DELETE FROM snapshots WHERE id = ?", id);
}

std::optional<SnapshotRecord> SnapshotStore::find(const std::string& id) {
    return db_.one(std::string("SELECT ") + kSnapshotColumns + " FROM snapshots WHERE id = ?",
                   readSnapshotRow, id);
}

std::vector<SnapshotRecord> SnapshotStore::list(const TenantScope& scope) {
    return db_.all(std::string("SELECT ") + kSnapshotColumns + " FROM snapshots" +
                       scope.whereTenant() + " ORDER BY created_at, id",
                   readSnapshotRow, scope.tenantParam());
}

}  // namespace airlock

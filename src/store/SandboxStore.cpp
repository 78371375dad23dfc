#include "store/SandboxStore.hpp"

#include "core/Error.hpp"
#include "store/StringList.hpp"

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
    if (s == "hibernated") return SandboxState::paused;  // as the API shows a hibernated pause
    return SandboxState::error;
}

namespace {
constexpr const char* kSandboxColumns =
    "id, tenant, template, state, vcpus, memory_mib, created_at, metadata, env, error, snapshot, "
    "disk, layers,"
    " timeout_s, on_timeout, expires_at, policy, secrets, secret_names, network, qemu_uid, "
    "disk_bytes, packages, task, artifacts, port_access, paused_without_memory, auto_resume,"
    " volumes, idle, hibernated, pause_reason";

SandboxRecord readSandboxRow(const Database::Statement& st) {
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
    r.layers = stringListFromColumn(st.text(12));
    r.timeoutS = st.integer(13);
    r.onTimeout = st.text(14);
    r.expiresAt = st.integer(15);
    r.policyJson = st.text(16);
    r.secretsSealed = st.text(17);
    r.secretNames = stringListFromColumn(st.text(18));
    r.network = stringListFromColumn(st.text(19));
    r.qemuUid = st.integer(20);
    r.diskBytes = static_cast<std::uint64_t>(st.integer(21));
    r.packagesJson = st.text(22);
    r.taskJson = st.text(23);
    r.artifacts = stringListFromColumn(st.text(24));
    r.portAccess = st.text(25);
    r.pausedWithoutMemory = st.integer(26) != 0;
    r.autoResume = st.integer(27) != 0;
    r.volumesJson = st.text(28);
    r.idleJson = st.text(29);
    r.hibernated = st.integer(30) != 0;
    r.pauseReason = st.text(31);
    return r;
}
}  // namespace

SandboxStore::SandboxStore(Database& db) : db_(db) {}

void SandboxStore::updateNetwork(const std::string& id, const std::vector<std::string>& network) {
    db_.run("UPDATE sandboxes SET network = ? WHERE id = ?", stringListColumn(network), id);
}

void SandboxStore::updateSecrets(const std::string& id, const std::string& sealed,
                                 const std::vector<std::string>& names) {
    db_.run("UPDATE sandboxes SET secrets = ?, secret_names = ? WHERE id = ?", sealed,
            stringListColumn(names), id);
}

void SandboxStore::updateDisk(const std::string& id, const std::string& disk,
                              const std::vector<std::string>& layers) {
    db_.run("UPDATE sandboxes SET disk = ?, layers = ? WHERE id = ?", disk,
            stringListColumn(layers), id);
}

void SandboxStore::updateTimeout(const std::string& id, std::int64_t timeoutS,
                                 std::int64_t expiresAt) {
    db_.run("UPDATE sandboxes SET timeout_s = ?, expires_at = ? WHERE id = ?", timeoutS, expiresAt,
            id);
}

void SandboxStore::insert(const SandboxRecord& r) { write(r, false); }
void SandboxStore::replace(const SandboxRecord& r) { write(r, true); }

void SandboxStore::write(const SandboxRecord& r, bool replace) {
    db_.run(std::string(replace ? "INSERT OR REPLACE" : "INSERT") + " INTO sandboxes (" +
                kSandboxColumns +
                ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            r.id, r.tenant, r.templateName, sandboxStateName(r.state), r.vcpus, r.memoryMib,
            r.createdAt, r.metadataJson, r.envJson, r.error, r.snapshotId, r.disk,
            stringListColumn(r.layers), r.timeoutS, r.onTimeout, r.expiresAt, r.policyJson,
            r.secretsSealed, stringListColumn(r.secretNames), stringListColumn(r.network),
            r.qemuUid, r.diskBytes, r.packagesJson, r.taskJson, stringListColumn(r.artifacts),
            r.portAccess, r.pausedWithoutMemory ? 1 : 0, r.autoResume ? 1 : 0, r.volumesJson,
            r.idleJson, r.hibernated ? 1 : 0, r.pauseReason);
}

void SandboxStore::updateState(const std::string& id, SandboxState state,
                               const std::string& error) {
    db_.run("UPDATE sandboxes SET state = ?, error = ? WHERE id = ?", sandboxStateName(state),
            error, id);
}

void SandboxStore::updatePaused(const std::string& id, SandboxState state, bool withoutMemory,
                                bool hibernated, const std::string& reason) {
    db_.run(
        "UPDATE sandboxes SET state = ?, error = '', paused_without_memory = ?, hibernated = ?, "
        "pause_reason = ? WHERE id = ?",
        sandboxStateName(state), withoutMemory ? 1 : 0, hibernated ? 1 : 0, reason, id);
}

void SandboxStore::remove(const std::string& id) {
    db_.run("DELETE FROM sandboxes WHERE id = ?", id);
}

std::optional<SandboxRecord> SandboxStore::find(const std::string& id) {
    return db_.one(std::string("SELECT ") + kSandboxColumns + " FROM sandboxes WHERE id = ?",
                   readSandboxRow, id);
}

std::vector<SandboxRecord> SandboxStore::list(const TenantScope& scope) {
    return db_.all(std::string("SELECT ") + kSandboxColumns + " FROM sandboxes" +
                       scope.whereTenant() + " ORDER BY created_at, id",
                   readSandboxRow, scope.tenantParam());
}

}  // namespace airlock

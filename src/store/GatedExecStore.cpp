#include "store/GatedExecStore.hpp"

namespace airlock {
namespace {
constexpr const char* kGatedExecColumns =
    "id, approval_id, sandbox, tenant, request, command, class, reason, state, requested_at, "
    "expires_at, decided_at,"
    " decided_by, decision_reason, exit_code, stdout, stderr, error, request_digest, shown";

GatedExec readGatedExecRow(const Database::Statement& st) {
    GatedExec e;
    e.id = st.text(0);
    e.approvalId = st.text(1);
    e.sandboxId = st.text(2);
    e.tenant = st.text(3);
    e.requestJson = st.text(4);
    e.command = st.text(5);
    e.commandClass = st.text(6);
    e.reason = st.text(7);
    e.state = st.text(8);
    e.requestedAt = st.text(9);
    e.expiresAt = st.integer(10);
    e.decidedAt = st.text(11);
    e.decidedBy = st.text(12);
    e.decisionReason = st.text(13);
    e.exitCode = st.integer(14);
    e.stdoutData = st.text(15);
    e.stderrData = st.text(16);
    e.error = st.text(17);
    e.requestDigest = st.text(18);
    e.shownJson = st.text(19);
    return e;
}
}  // namespace

GatedExecStore::GatedExecStore(Database& db) : db_(db) {}

void GatedExecStore::insert(const GatedExec& e) {
    db_.run(std::string("INSERT INTO gated_execs (") + kGatedExecColumns +
                ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            e.id, e.approvalId, e.sandboxId, e.tenant, e.requestJson, e.command, e.commandClass,
            e.reason, e.state, e.requestedAt, e.expiresAt, e.decidedAt, e.decidedBy,
            e.decisionReason, e.exitCode, e.stdoutData, e.stderrData, e.error, e.requestDigest,
            e.shownJson);
}

bool GatedExecStore::decide(const std::string& id, const std::string& state,
                            const std::string& decidedAt, const std::string& decidedBy,
                            const std::string& reason) {
    return db_.run(
               "UPDATE gated_execs SET state = ?, decided_at = ?, decided_by = ?, "
               "decision_reason = ? WHERE id = ? AND state = 'pending_approval'",
               state, decidedAt, decidedBy, reason, id) == 1;
}

void GatedExecStore::finish(const std::string& id, const std::string& state, std::int64_t exitCode,
                            const std::string& out, const std::string& err,
                            const std::string& error) {
    db_.run(
        "UPDATE gated_execs SET state = ?, exit_code = ?, stdout = ?, stderr = ?, error = ? "
        "WHERE id = ?",
        state, exitCode, out, err, error, id);
}

std::optional<GatedExec> GatedExecStore::find(const std::string& id) {
    return db_.one(std::string("SELECT ") + kGatedExecColumns + " FROM gated_execs WHERE id = ?",
                   readGatedExecRow, id);
}

std::optional<GatedExec> GatedExecStore::findByApproval(const std::string& approvalId) {
    return db_.one(
        std::string("SELECT ") + kGatedExecColumns + " FROM gated_execs WHERE approval_id = ?",
        readGatedExecRow, approvalId);
}

std::optional<GatedExec> GatedExecStore::findLatestRequest(const std::string& sandboxId,
                                                           const std::string& requestJson) {
    return db_.one(std::string("SELECT ") + kGatedExecColumns +
                       " FROM gated_execs WHERE sandbox = ? AND request = ?"
                       " ORDER BY requested_at DESC, rowid DESC LIMIT 1",
                   readGatedExecRow, sandboxId, requestJson);
}

std::vector<GatedExec> GatedExecStore::pending(const TenantScope& scope) {
    return db_.all(std::string("SELECT ") + kGatedExecColumns +
                       " FROM gated_execs WHERE state = 'pending_approval'" +
                       scope.whereTenant(" AND") + " ORDER BY requested_at, id",
                   readGatedExecRow, scope.tenantParam());
}

std::vector<GatedExec> GatedExecStore::running(const std::string& idPrefix) {
    return db_.all(std::string("SELECT ") + kGatedExecColumns +
                       " FROM gated_execs WHERE state = 'running' AND substr(id, 1, ?) = ?",
                   readGatedExecRow, idPrefix.size(), idPrefix);
}

}  // namespace airlock

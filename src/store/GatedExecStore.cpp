#include "store/GatedExecStore.hpp"

#include <sqlite3.h>

namespace airlock {
namespace {
constexpr const char* kColumns =
    "id, approval_id, sandbox, tenant, request, command, class, reason, state, requested_at, "
    "expires_at, decided_at,"
    " decided_by, decision_reason, exit_code, stdout, stderr, error";

GatedExec readRow(Database::Statement& st) {
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
    return e;
}
}  // namespace

GatedExecStore::GatedExecStore(Database& db) : db_(db) {
    db_.exec(
        "CREATE TABLE IF NOT EXISTS gated_execs ("
        " id TEXT PRIMARY KEY, approval_id TEXT UNIQUE NOT NULL, sandbox TEXT NOT NULL, tenant "
        "TEXT NOT NULL,"
        " request TEXT NOT NULL, command TEXT NOT NULL, class TEXT NOT NULL, reason TEXT NOT NULL, "
        "state TEXT NOT NULL,"
        " requested_at TEXT NOT NULL, expires_at INTEGER NOT NULL, decided_at TEXT NOT NULL "
        "DEFAULT '',"
        " decided_by TEXT NOT NULL DEFAULT '', decision_reason TEXT NOT NULL DEFAULT '', exit_code "
        "INTEGER NOT NULL DEFAULT -1,"
        " stdout TEXT NOT NULL DEFAULT '', stderr TEXT NOT NULL DEFAULT '', error TEXT NOT NULL "
        "DEFAULT '')");
}

void GatedExecStore::insert(const GatedExec& e) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, std::string("INSERT INTO gated_execs (") + kColumns +
                                       ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
        st.bind(1, e.id)
            .bind(2, e.approvalId)
            .bind(3, e.sandboxId)
            .bind(4, e.tenant)
            .bind(5, e.requestJson);
        st.bind(6, e.command)
            .bind(7, e.commandClass)
            .bind(8, e.reason)
            .bind(9, e.state)
            .bind(10, e.requestedAt);
        st.bind(11, e.expiresAt)
            .bind(12, e.decidedAt)
            .bind(13, e.decidedBy)
            .bind(14, e.decisionReason);
        st.bind(15, e.exitCode).bind(16, e.stdoutData).bind(17, e.stderrData).bind(18, e.error);
        st.step();
    });
}

bool GatedExecStore::decide(const std::string& id, const std::string& state,
                            const std::string& decidedAt, const std::string& decidedBy,
                            const std::string& reason) {
    return db_.locked([&](sqlite3* db) {
        Database::Statement st(
            db,
            "UPDATE gated_execs SET state = ?, decided_at = ?, decided_by = ?, decision_reason = ?"
            " WHERE id = ? AND state = 'pending_approval'");
        st.bind(1, state).bind(2, decidedAt).bind(3, decidedBy).bind(4, reason).bind(5, id);
        st.step();
        return sqlite3_changes(db) == 1;
    });
}

void GatedExecStore::finish(const std::string& id, const std::string& state, std::int64_t exitCode,
                            const std::string& out, const std::string& err,
                            const std::string& error) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db,
                               "UPDATE gated_execs SET state = ?, exit_code = ?, stdout = ?, "
                               "stderr = ?, error = ? WHERE id = ?");
        st.bind(1, state).bind(2, exitCode).bind(3, out).bind(4, err).bind(5, error).bind(6, id);
        st.step();
    });
}

std::optional<GatedExec> GatedExecStore::find(const std::string& id) {
    return db_.locked([&](sqlite3* db) -> std::optional<GatedExec> {
        Database::Statement st(
            db, std::string("SELECT ") + kColumns + " FROM gated_execs WHERE id = ?");
        st.bind(1, id);
        if (!st.step()) return std::nullopt;
        return readRow(st);
    });
}

std::optional<GatedExec> GatedExecStore::findByApproval(const std::string& approvalId) {
    return db_.locked([&](sqlite3* db) -> std::optional<GatedExec> {
        Database::Statement st(
            db, std::string("SELECT ") + kColumns + " FROM gated_execs WHERE approval_id = ?");
        st.bind(1, approvalId);
        if (!st.step()) return std::nullopt;
        return readRow(st);
    });
}

std::optional<GatedExec> GatedExecStore::findLatestRequest(const std::string& sandboxId,
                                                          const std::string& requestJson) {
    return db_.locked([&](sqlite3* db) -> std::optional<GatedExec> {
        Database::Statement st(db, std::string("SELECT ") + kColumns +
                                       " FROM gated_execs WHERE sandbox = ? AND request = ?"
                                       " ORDER BY requested_at DESC, rowid DESC LIMIT 1");
        st.bind(1, sandboxId).bind(2, requestJson);
        if (!st.step()) return std::nullopt;
        return readRow(st);
    });
}

std::vector<GatedExec> GatedExecStore::pending(const TenantScope& scope) {
    return db_.locked([&](sqlite3* db) {
        std::string sql = std::string("SELECT ") + kColumns +
                          " FROM gated_execs WHERE state = 'pending_approval'";
        if (!scope.isAll()) sql += " AND tenant = ?";
        sql += " ORDER BY requested_at, id";
        Database::Statement st(db, sql);
        if (!scope.isAll()) st.bind(1, scope.tenant());
        std::vector<GatedExec> out;
        while (st.step()) out.push_back(readRow(st));
        return out;
    });
}

std::vector<GatedExec> GatedExecStore::running(const std::string& idPrefix) {
    return db_.locked([&](sqlite3* db) {
        Database::Statement st(
            db, std::string("SELECT ") + kColumns +
                    " FROM gated_execs WHERE state = 'running' AND substr(id, 1, ?) = ?");
        st.bind(1, static_cast<std::int64_t>(idPrefix.size())).bind(2, idPrefix);
        std::vector<GatedExec> out;
        while (st.step()) out.push_back(readRow(st));
        return out;
    });
}

}  // namespace airlock

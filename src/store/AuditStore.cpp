#include "store/AuditStore.hpp"

namespace airlock {

AuditStore::AuditStore(Database& db) : db_(db) {}

void AuditStore::append(const AuditEvent& e) {
    db_.run("INSERT INTO audit (sandbox, tenant, at, type, data) VALUES (?,?,?,?,?)", e.sandboxId,
            e.tenant, e.at, e.type, e.dataJson);
    if (appended_) appended_();
}

std::vector<AuditEvent> AuditStore::feed(const TenantScope& scope, std::int64_t after, int limit) {
    return db_.all(
        "SELECT seq, sandbox, tenant, at, type, data FROM audit WHERE seq > ?" +
            scope.whereTenant(" AND") + " ORDER BY seq LIMIT ?",
        [](const Database::Statement& st) {
            return AuditEvent{st.integer(0), st.text(1), st.text(2),
                              st.text(3),    st.text(4), st.text(5)};
        },
        after, scope.tenantParam(), limit);
}

std::int64_t AuditStore::head() {
    return db_.one("SELECT COALESCE(MAX(seq), 0) FROM audit",
                   [](const Database::Statement& st) { return st.integer(0); })
        .value_or(0);
}

std::vector<AuditEvent> AuditStore::query(const std::string& sandboxId, const AuditQuery& q) {
    std::string sql =
        "SELECT seq, sandbox, tenant, at, type, data FROM audit WHERE sandbox = ? AND seq > ?";
    Database::Params filters;
    if (!q.type.empty()) {
        bool prefix = q.type.back() == '.';
        sql += prefix ? " AND substr(type, 1, ?) = ?" : " AND type = ?";
        if (prefix) filters.emplace_back(static_cast<std::int64_t>(q.type.size()));
        filters.emplace_back(q.type);
    }
    if (!q.since.empty()) {
        sql += " AND at >= ?";
        filters.emplace_back(q.since);
    }
    sql += " ORDER BY seq LIMIT ?";
    return db_.all(
        sql,
        [](const Database::Statement& st) {
            return AuditEvent{st.integer(0), st.text(1), st.text(2),
                              st.text(3),    st.text(4), st.text(5)};
        },
        sandboxId, q.after, filters, q.limit);
}

std::string AuditStore::tenantOf(const std::string& sandboxId) {
    return db_.one("SELECT tenant FROM audit WHERE sandbox = ? LIMIT 1", textColumn, sandboxId)
        .value_or("");
}

std::int64_t AuditStore::prune(const std::string& olderThan) {
    // A live sandbox keeps its whole history; a deleted one keeps it until
    // its last event (the deletion) is older than the cut-off. The sandboxes
    // table lives in the same database (SandboxStore).
    return db_.run(
        "DELETE FROM audit WHERE sandbox IN (SELECT sandbox FROM audit GROUP BY sandbox HAVING "
        "MAX(at) < ?) AND sandbox NOT IN (SELECT id FROM sandboxes)",
        olderThan);
}

}  // namespace airlock

#include "store/AuditStore.hpp"

#include <sqlite3.h>

namespace airlock {

AuditStore::AuditStore(Database& db) : db_(db) {
    db_.exec(
        "CREATE TABLE IF NOT EXISTS audit ("
        " seq INTEGER PRIMARY KEY AUTOINCREMENT, sandbox TEXT NOT NULL, tenant TEXT NOT NULL, at TEXT NOT NULL,"
        " type TEXT NOT NULL, data TEXT NOT NULL)");
    db_.exec("CREATE INDEX IF NOT EXISTS audit_sandbox ON audit (sandbox, seq)");
}

void AuditStore::append(const AuditEvent& e) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "INSERT INTO audit (sandbox, tenant, at, type, data) VALUES (?,?,?,?,?)");
        st.bind(1, e.sandboxId).bind(2, e.tenant).bind(3, e.at).bind(4, e.type).bind(5, e.dataJson);
        st.step();
    });
}

std::vector<AuditEvent> AuditStore::query(const std::string& sandboxId, const AuditQuery& q) {
    return db_.locked([&](sqlite3* db) {
        std::string sql = "SELECT seq, sandbox, tenant, at, type, data FROM audit WHERE sandbox = ? AND seq > ?";
        bool prefix = !q.type.empty() && q.type.back() == '.';
        if (!q.type.empty()) sql += prefix ? " AND substr(type, 1, ?) = ?" : " AND type = ?";
        if (!q.since.empty()) sql += " AND at >= ?";
        sql += " ORDER BY seq LIMIT ?";
        Database::Statement st(db, sql);
        int i = 1;
        st.bind(i++, sandboxId);
        st.bind(i++, q.after);
        if (!q.type.empty()) {
            if (prefix) st.bind(i++, static_cast<std::int64_t>(q.type.size()));
            st.bind(i++, q.type);
        }
        if (!q.since.empty()) st.bind(i++, q.since);
        st.bind(i++, static_cast<std::int64_t>(q.limit));
        std::vector<AuditEvent> out;
        while (st.step()) {
            AuditEvent e;
            e.seq = st.integer(0);
            e.sandboxId = st.text(1);
            e.tenant = st.text(2);
            e.at = st.text(3);
            e.type = st.text(4);
            e.dataJson = st.text(5);
            out.push_back(std::move(e));
        }
        return out;
    });
}

std::string AuditStore::tenantOf(const std::string& sandboxId) {
    return db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "SELECT tenant FROM audit WHERE sandbox = ? LIMIT 1");
        st.bind(1, sandboxId);
        return st.step() ? st.text(0) : std::string();
    });
}

std::int64_t AuditStore::prune(const std::string& olderThan) {
    return db_.locked([&](sqlite3* db) {
        // A live sandbox keeps its whole history; a deleted one keeps it
        // until its last event (the deletion) is older than the cut-off.
        // The sandboxes table lives in the same database (SandboxStore).
        Database::Statement st(db,
                               "DELETE FROM audit WHERE sandbox IN (SELECT sandbox FROM audit GROUP BY sandbox HAVING MAX(at) < ?)"
                               " AND sandbox NOT IN (SELECT id FROM sandboxes)");
        st.bind(1, olderThan);
        st.step();
        return static_cast<std::int64_t>(sqlite3_changes(db));
    });
}

}  // namespace airlock

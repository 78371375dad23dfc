#include "store/PortStore.hpp"

#include <sqlite3.h>

namespace airlock {

PortStore::PortStore(Database& db) : db_(db) {
    db_.exec(
        "CREATE TABLE IF NOT EXISTS ports (sandbox_id TEXT NOT NULL, port INTEGER NOT NULL, token TEXT NOT NULL,"
        " created_at TEXT NOT NULL, PRIMARY KEY (sandbox_id, port))");
}

void PortStore::upsert(const ExposedPort& p) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "INSERT OR REPLACE INTO ports (sandbox_id, port, token, created_at) VALUES (?,?,?,?)");
        st.bind(1, p.sandboxId).bind(2, std::int64_t(p.port)).bind(3, p.token).bind(4, p.createdAt);
        st.step();
    });
}

void PortStore::remove(const std::string& sandboxId, unsigned port) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "DELETE FROM ports WHERE sandbox_id = ? AND port = ?");
        st.bind(1, sandboxId).bind(2, std::int64_t(port));
        st.step();
    });
}

void PortStore::removeAll(const std::string& sandboxId) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "DELETE FROM ports WHERE sandbox_id = ?");
        st.bind(1, sandboxId);
        st.step();
    });
}

std::optional<ExposedPort> PortStore::find(const std::string& sandboxId, unsigned port) {
    return db_.locked([&](sqlite3* db) -> std::optional<ExposedPort> {
        Database::Statement st(db, "SELECT token, created_at FROM ports WHERE sandbox_id = ? AND port = ?");
        st.bind(1, sandboxId).bind(2, std::int64_t(port));
        if (!st.step()) return std::nullopt;
        return ExposedPort{sandboxId, port, st.text(0), st.text(1)};
    });
}

std::vector<ExposedPort> PortStore::list(const std::string& sandboxId) {
    return db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "SELECT port, token, created_at FROM ports WHERE sandbox_id = ? ORDER BY port");
        st.bind(1, sandboxId);
        std::vector<ExposedPort> out;
        while (st.step()) out.push_back(ExposedPort{sandboxId, static_cast<unsigned>(st.integer(0)), st.text(1), st.text(2)});
        return out;
    });
}

}  // namespace airlock

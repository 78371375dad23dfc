#include "store/WorkspaceStore.hpp"

#include <sqlite3.h>

namespace airlock {

WorkspaceStore::WorkspaceStore(Database& db) : db_(db) {
    db_.exec(
        "CREATE TABLE IF NOT EXISTS workspaces (owner TEXT PRIMARY KEY, tenant TEXT NOT NULL, json "
        "TEXT NOT NULL)");
}

void WorkspaceStore::put(const std::string& owner, const std::string& tenant,
                         const std::string& json) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(
            db, "INSERT OR REPLACE INTO workspaces (owner, tenant, json) VALUES (?,?,?)");
        st.bind(1, owner).bind(2, tenant).bind(3, json);
        st.step();
    });
}

std::optional<std::string> WorkspaceStore::find(const std::string& owner) {
    return db_.locked([&](sqlite3* db) -> std::optional<std::string> {
        Database::Statement st(db, "SELECT json FROM workspaces WHERE owner = ?");
        st.bind(1, owner);
        if (!st.step()) return std::nullopt;
        return st.text(0);
    });
}

void WorkspaceStore::copy(const std::string& from, const std::string& to) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db,
                               "INSERT OR REPLACE INTO workspaces (owner, tenant, json)"
                               " SELECT ?, tenant, json FROM workspaces WHERE owner = ?");
        st.bind(1, to).bind(2, from);
        st.step();
    });
}

void WorkspaceStore::remove(const std::string& owner) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "DELETE FROM workspaces WHERE owner = ?");
        st.bind(1, owner);
        st.step();
    });
}

}  // namespace airlock

#include "store/WorkspaceStore.hpp"

namespace airlock {

WorkspaceStore::WorkspaceStore(Database& db) : db_(db) {}

void WorkspaceStore::put(const std::string& owner, const std::string& tenant,
                         const std::string& json) {
    db_.run("INSERT OR REPLACE INTO workspaces (owner, tenant, json) VALUES (?,?,?)", owner, tenant,
            json);
}

std::optional<std::string> WorkspaceStore::find(const std::string& owner) {
    return db_.one("SELECT json FROM workspaces WHERE owner = ?", textColumn, owner);
}

void WorkspaceStore::copy(const std::string& from, const std::string& to) {
    db_.run(
        "INSERT OR REPLACE INTO workspaces (owner, tenant, json)"
        " SELECT ?, tenant, json FROM workspaces WHERE owner = ?",
        to, from);
}

std::vector<std::string> WorkspaceStore::all() {
    return db_.all("SELECT json FROM workspaces", textColumn);
}

void WorkspaceStore::remove(const std::string& owner) {
    db_.run("DELETE FROM workspaces WHERE owner = ?", owner);
}

}  // namespace airlock

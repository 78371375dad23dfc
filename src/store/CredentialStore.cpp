#include "store/CredentialStore.hpp"

#include <sqlite3.h>

namespace airlock {

CredentialStore::CredentialStore(Database& db) : db_(db) {
    db_.exec(
        "CREATE TABLE IF NOT EXISTS credentials (tenant TEXT NOT NULL, name TEXT NOT NULL, kind "
        "TEXT NOT NULL,"
        " host TEXT NOT NULL, username TEXT NOT NULL, secret_sealed TEXT NOT NULL, known_hosts "
        "TEXT NOT NULL,"
        " created_at TEXT NOT NULL, PRIMARY KEY (tenant, name))");
}

bool CredentialStore::insert(const CredentialRecord& c) {
    return db_.locked([&](sqlite3* db) {
        Database::Statement st(
            db,
            "INSERT OR IGNORE INTO credentials (tenant, name, kind, host, username, secret_sealed,"
            " known_hosts, created_at) VALUES (?,?,?,?,?,?,?,?)");
        st.bind(1, c.tenant).bind(2, c.name).bind(3, c.kind).bind(4, c.host).bind(5, c.username);
        st.bind(6, c.secretSealed).bind(7, c.knownHosts).bind(8, c.createdAt);
        st.step();
        return sqlite3_changes(db) > 0;
    });
}

namespace {
constexpr const char* kColumns =
    "SELECT tenant, name, kind, host, username, secret_sealed, known_hosts, created_at FROM "
    "credentials ";
CredentialRecord rowOf(const Database::Statement& st) {
    return CredentialRecord{st.text(0), st.text(1), st.text(2), st.text(3),
                            st.text(4), st.text(5), st.text(6), st.text(7)};
}
}  // namespace

std::optional<CredentialRecord> CredentialStore::find(const std::string& tenant,
                                                      const std::string& name) {
    return db_.locked([&](sqlite3* db) -> std::optional<CredentialRecord> {
        Database::Statement st(db, std::string(kColumns) + "WHERE tenant = ? AND name = ?");
        st.bind(1, tenant).bind(2, name);
        if (!st.step()) return std::nullopt;
        return rowOf(st);
    });
}

std::vector<CredentialRecord> CredentialStore::list(const std::string& tenant) {
    return db_.locked([&](sqlite3* db) {
        Database::Statement st(db, std::string(kColumns) + "WHERE tenant = ? ORDER BY name");
        st.bind(1, tenant);
        std::vector<CredentialRecord> out;
        while (st.step()) out.push_back(rowOf(st));
        return out;
    });
}

bool CredentialStore::remove(const std::string& tenant, const std::string& name) {
    return db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "DELETE FROM credentials WHERE tenant = ? AND name = ?");
        st.bind(1, tenant).bind(2, name);
        st.step();
        return sqlite3_changes(db) > 0;
    });
}

}  // namespace airlock

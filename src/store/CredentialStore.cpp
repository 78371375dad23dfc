#include "store/CredentialStore.hpp"

#include "store/StringList.hpp"

namespace airlock {

CredentialStore::CredentialStore(Database& db) : db_(db) {}

bool CredentialStore::insert(const CredentialRecord& c) {
    return db_.run(
               "INSERT OR IGNORE INTO credentials (tenant, name, kind, host, username, "
               "secret_sealed, known_hosts, created_at, scope) VALUES (?,?,?,?,?,?,?,?,?)",
               c.tenant, c.name, c.kind, c.host, c.username, c.secretSealed, c.knownHosts,
               c.createdAt, stringListColumn(c.scope)) > 0;
}

namespace {
constexpr const char* kCredentialSelect =
    "SELECT tenant, name, kind, host, username, secret_sealed, known_hosts, created_at, scope "
    "FROM "
    "credentials ";

CredentialRecord rowOf(const Database::Statement& st) {
    return CredentialRecord{st.text(0), st.text(1), st.text(2),
                            st.text(3), st.text(4), st.text(5),
                            st.text(6), st.text(7), stringListFromColumn(st.text(8))};
}
}  // namespace

std::optional<CredentialRecord> CredentialStore::find(const std::string& tenant,
                                                      const std::string& name) {
    return db_.one(std::string(kCredentialSelect) + "WHERE tenant = ? AND name = ?", rowOf, tenant,
                   name);
}

std::vector<CredentialRecord> CredentialStore::list(const std::string& tenant) {
    return db_.all(std::string(kCredentialSelect) + "WHERE tenant = ? ORDER BY name", rowOf,
                   tenant);
}

bool CredentialStore::remove(const std::string& tenant, const std::string& name) {
    return db_.run("DELETE FROM credentials WHERE tenant = ? AND name = ?", tenant, name) > 0;
}

}  // namespace airlock

#include "store/CredentialStore.hpp"

#include <nlohmann/json.hpp>

#include "store/StringList.hpp"

namespace airlock {

std::string storedCredentialJson(const CredentialRecord& c) {
    return nlohmann::json{{"tenant", c.tenant},
                          {"name", c.name},
                          {"kind", c.kind},
                          {"host", c.host},
                          {"username", c.username},
                          {"secret_sealed", c.secretSealed},
                          {"known_hosts", c.knownHosts},
                          {"created_at", c.createdAt},
                          {"scope", c.scope}}
        .dump();
}

std::optional<CredentialRecord> storedCredentialFromJson(const std::string& text) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object()) return std::nullopt;
    try {
        return CredentialRecord{j.at("tenant").get<std::string>(),
                                j.at("name").get<std::string>(),
                                j.at("kind").get<std::string>(),
                                j.at("host").get<std::string>(),
                                j.at("username").get<std::string>(),
                                j.at("secret_sealed").get<std::string>(),
                                j.at("known_hosts").get<std::string>(),
                                j.at("created_at").get<std::string>(),
                                j.at("scope").get<std::vector<std::string>>()};
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

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

#include "store/ApiKeyStore.hpp"

#include "core/Clock.hpp"
#include "core/Hex.hpp"
#include "core/Ids.hpp"
#include "core/Sha256.hpp"
#include "store/TenantScope.hpp"

namespace airlock {

std::string roleName(Role role) {
    switch (role) {
        case Role::agent:
            return "agent";
        case Role::approver:
            return "approver";
        case Role::admin:
            return "admin";
    }
    return "agent";
}

std::optional<Role> parseRole(const std::string& name) {
    if (name == "agent") return Role::agent;
    if (name == "approver") return Role::approver;
    if (name == "admin") return Role::admin;
    return std::nullopt;
}

namespace {
constexpr const char* kApiKeyColumns = "id, tenant, role, label, created_at, expires_at";

ApiKeyRecord readApiKeyRow(const Database::Statement& st) {
    ApiKeyRecord r;
    r.id = st.text(0);
    r.tenant = st.text(1);
    // An unknown role (a newer release's) grants the least.
    r.role = parseRole(st.text(2)).value_or(Role::approver);
    r.name = st.text(3);
    r.createdAt = st.text(4);
    r.expiresAt = st.integer(5);
    return r;
}
}  // namespace

std::string newApiKey() { return "ak_" + hexEncode(randomBytes(24)); }

ApiKeyStore::ApiKeyStore(Database& db) : db_(db) {}

ApiKeyStore::Created ApiKeyStore::create(const std::string& tenant, Role role,
                                         const std::string& name, std::int64_t expiresAt) {
    Created c;
    c.key = newApiKey();
    c.record = ApiKeyRecord{newId("key-"), tenant, role, name, nowTimestamp(), expiresAt};
    db_.run(
        "INSERT INTO api_keys (key_hash, id, tenant, role, label, created_at, expires_at)"
        " VALUES (?,?,?,?,?,?,?)",
        sha256Hex(c.key), c.record.id, tenant, roleName(role), name, c.record.createdAt, expiresAt);
    return c;
}

std::optional<ApiKeyRecord> ApiKeyStore::findValid(const std::string& key, std::int64_t now) {
    if (key.empty() || key.size() > 256) return std::nullopt;
    // Looking up by hash: the comparison never touches the clear key.
    auto r = db_.one(std::string("SELECT ") + kApiKeyColumns + " FROM api_keys WHERE key_hash = ?",
                     readApiKeyRow, sha256Hex(key));
    if (r && r->expiresAt > 0 && r->expiresAt <= now) return std::nullopt;
    return r;
}

std::optional<ApiKeyRecord> ApiKeyStore::find(const std::string& id) {
    return db_.one(std::string("SELECT ") + kApiKeyColumns + " FROM api_keys WHERE id = ?",
                   readApiKeyRow, id);
}

std::vector<ApiKeyRecord> ApiKeyStore::list(const std::optional<std::string>& tenant) {
    auto scope = tenant ? TenantScope::only(*tenant) : TenantScope::all();
    return db_.all(std::string("SELECT ") + kApiKeyColumns + " FROM api_keys" +
                       scope.whereTenant() + " ORDER BY created_at, id",
                   readApiKeyRow, scope.tenantParam());
}

std::vector<ApiKeyRecord> ApiKeyStore::drivers(const std::string& tenant, std::int64_t now) {
    return db_.all(std::string("SELECT ") + kApiKeyColumns +
                       " FROM api_keys WHERE (tenant = ? OR role = 'admin') AND role != 'approver'"
                       " AND (expires_at = 0 OR expires_at > ?) ORDER BY created_at, id",
                   readApiKeyRow, Database::Params{tenant, now});
}

bool ApiKeyStore::remove(const std::string& id) {
    return db_.run("DELETE FROM api_keys WHERE id = ?", id) > 0;
}

std::size_t ApiKeyStore::liveAdmins(std::int64_t now) {
    return static_cast<std::size_t>(
        *db_.one("SELECT COUNT(*) FROM api_keys WHERE role = 'admin' AND (expires_at = 0 OR "
                 "expires_at > ?)",
                 integerColumn, now));
}

std::optional<ApiKeys::Created> ApiKeyStore::createFirstAdmin() {
    if (!empty()) return std::nullopt;
    return create("admin", Role::admin, "admin", 0);
}

bool ApiKeyStore::empty() { return *db_.one("SELECT COUNT(*) FROM api_keys", integerColumn) == 0; }

}  // namespace airlock

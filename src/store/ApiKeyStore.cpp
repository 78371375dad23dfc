#include "store/ApiKeyStore.hpp"

#include <sqlite3.h>

#include "core/Clock.hpp"
#include "core/Ids.hpp"
#include "core/Sha256.hpp"

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
constexpr const char* kColumns = "id, tenant, role, label, created_at, expires_at";

ApiKeyRecord readRow(Database::Statement& st) {
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

std::string newApiKey() {
    static const char kHex[] = "0123456789abcdef";
    std::string key = "ak_";
    for (unsigned char b : randomBytes(24)) {
        key += kHex[b >> 4];
        key += kHex[b & 0x0f];
    }
    return key;
}

ApiKeyStore::ApiKeyStore(Database& db) : db_(db) {
    db_.exec(
        "CREATE TABLE IF NOT EXISTS api_keys (key_hash TEXT PRIMARY KEY, tenant TEXT NOT NULL,"
        " label TEXT NOT NULL, created_at TEXT NOT NULL)");
    // Added with roles. Keys from before were the single admin key.
    db_.addColumnIfMissing("api_keys", "id TEXT NOT NULL DEFAULT ''");
    db_.addColumnIfMissing("api_keys", "role TEXT NOT NULL DEFAULT 'admin'");
    db_.addColumnIfMissing("api_keys", "expires_at INTEGER NOT NULL DEFAULT 0");
    db_.exec("UPDATE api_keys SET id = 'key-' || lower(hex(randomblob(10))) WHERE id = ''");
}

ApiKeyStore::Created ApiKeyStore::create(const std::string& tenant, Role role,
                                         const std::string& name, std::int64_t expiresAt) {
    Created c;
    c.key = newApiKey();
    c.record = ApiKeyRecord{newId("key-"), tenant, role, name, nowTimestamp(), expiresAt};
    db_.locked([&](sqlite3* db) {
        Database::Statement st(
            db,
            "INSERT INTO api_keys (key_hash, id, tenant, role, label, created_at, expires_at)"
            " VALUES (?,?,?,?,?,?,?)");
        st.bind(1, sha256Hex(c.key)).bind(2, c.record.id).bind(3, tenant).bind(4, roleName(role));
        st.bind(5, name).bind(6, c.record.createdAt).bind(7, expiresAt);
        st.step();
    });
    return c;
}

std::optional<ApiKeyRecord> ApiKeyStore::findValid(const std::string& key, std::int64_t now) {
    if (key.empty() || key.size() > 256) return std::nullopt;
    // Looking up by hash: the comparison never touches the clear key.
    std::string hash = sha256Hex(key);
    auto r = db_.locked([&](sqlite3* db) -> std::optional<ApiKeyRecord> {
        Database::Statement st(
            db, std::string("SELECT ") + kColumns + " FROM api_keys WHERE key_hash = ?");
        st.bind(1, hash);
        if (!st.step()) return std::nullopt;
        return readRow(st);
    });
    if (r && r->expiresAt > 0 && r->expiresAt <= now) return std::nullopt;
    return r;
}

std::optional<ApiKeyRecord> ApiKeyStore::find(const std::string& id) {
    return db_.locked([&](sqlite3* db) -> std::optional<ApiKeyRecord> {
        Database::Statement st(db,
                               std::string("SELECT ") + kColumns + " FROM api_keys WHERE id = ?");
        st.bind(1, id);
        if (!st.step()) return std::nullopt;
        return readRow(st);
    });
}

std::vector<ApiKeyRecord> ApiKeyStore::list(const std::optional<std::string>& tenant) {
    return db_.locked([&](sqlite3* db) {
        std::vector<ApiKeyRecord> out;
        Database::Statement st(db, std::string("SELECT ") + kColumns + " FROM api_keys" +
                                       (tenant ? " WHERE tenant = ?" : "") +
                                       " ORDER BY created_at, id");
        if (tenant) st.bind(1, *tenant);
        while (st.step()) out.push_back(readRow(st));
        return out;
    });
}

bool ApiKeyStore::remove(const std::string& id) {
    return db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "DELETE FROM api_keys WHERE id = ?");
        st.bind(1, id);
        st.step();
        return sqlite3_changes(db) > 0;
    });
}

std::size_t ApiKeyStore::liveAdmins(std::int64_t now) {
    return db_.locked([&](sqlite3* db) {
        Database::Statement st(db,
                               "SELECT COUNT(*) FROM api_keys WHERE role = 'admin' AND (expires_at "
                               "= 0 OR expires_at > ?)");
        st.bind(1, now);
        st.step();
        return static_cast<std::size_t>(st.integer(0));
    });
}

bool ApiKeyStore::empty() {
    return db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "SELECT COUNT(*) FROM api_keys");
        st.step();
        return st.integer(0) == 0;
    });
}

}  // namespace airlock

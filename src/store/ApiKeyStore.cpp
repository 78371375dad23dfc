#include "store/ApiKeyStore.hpp"

#include <sqlite3.h>

#include "core/Clock.hpp"
#include "core/Ids.hpp"
#include "core/Sha256.hpp"

namespace airlock {

ApiKeyStore::ApiKeyStore(Database& db) : db_(db) {
    db_.exec(
        "CREATE TABLE IF NOT EXISTS api_keys (key_hash TEXT PRIMARY KEY, tenant TEXT NOT NULL,"
        " label TEXT NOT NULL, created_at TEXT NOT NULL)");
}

std::string ApiKeyStore::createKey(const std::string& tenant, const std::string& label) {
    std::string key = "ak_" + newSecretToken();
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "INSERT INTO api_keys (key_hash, tenant, label, created_at) VALUES (?,?,?,?)");
        st.bind(1, sha256Hex(key)).bind(2, tenant).bind(3, label).bind(4, nowTimestamp());
        st.step();
    });
    return key;
}

std::optional<std::string> ApiKeyStore::tenantForKey(const std::string& key) {
    if (key.empty() || key.size() > 256) return std::nullopt;
    // Looking up by hash: the comparison never touches the clear key.
    std::string hash = sha256Hex(key);
    return db_.locked([&](sqlite3* db) -> std::optional<std::string> {
        Database::Statement st(db, "SELECT tenant FROM api_keys WHERE key_hash = ?");
        st.bind(1, hash);
        if (!st.step()) return std::nullopt;
        return st.text(0);
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

#pragma once
#include <optional>
#include <string>

#include "store/Database.hpp"

namespace airlock {

// API keys are stored as SHA-256 hashes only; a leaked state.db does not leak keys.
class ApiKeyStore {
public:
    explicit ApiKeyStore(Database& db);
    // Creates a key for `tenant` and returns it in clear text (shown once).
    std::string createKey(const std::string& tenant, const std::string& label);
    // The tenant the key belongs to, if any.
    std::optional<std::string> tenantForKey(const std::string& key);
    bool empty();

private:
    Database& db_;
};

}  // namespace airlock

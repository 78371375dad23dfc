#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/Database.hpp"

namespace airlock {

// What a key may do. agent: create and drive sandboxes; approver: read and
// decide its tenant's approvals, never run commands; admin: keys, tenants,
// and every tenant's objects.
enum class Role { agent, approver, admin };
std::string roleName(Role role);
std::optional<Role> parseRole(const std::string& name);

struct ApiKeyRecord {
    std::string id;  // key-...: names the key in listings, audit and DELETE
    std::string tenant;
    Role role = Role::agent;
    std::string name;
    std::string createdAt;
    std::int64_t expiresAt = 0;  // unix seconds; 0: never
};

// A new API key: "ak_" and 48 lowercase hex digits (192 random bits). The
// hex shape is what E2B's SDKs check a key against ("e2b_" and hex), so the
// same key works there with the prefix swapped. Keys minted before (base32)
// keep working.
std::string newApiKey();

// API keys are stored as SHA-256 hashes only; a leaked state.db does not leak keys.
class ApiKeyStore {
  public:
    explicit ApiKeyStore(Database& db);
    struct Created {
        ApiKeyRecord record;
        std::string key;  // in clear text: shown once
    };
    Created create(const std::string& tenant, Role role, const std::string& name,
                   std::int64_t expiresAt = 0);
    // The key's record if it exists and has not expired at `now`.
    std::optional<ApiKeyRecord> findValid(const std::string& key, std::int64_t now);
    std::optional<ApiKeyRecord> find(const std::string& id);
    // Every key, or a tenant's; never the hashes.
    std::vector<ApiKeyRecord> list(const std::optional<std::string>& tenant);
    // False when there is no such key.
    bool remove(const std::string& id);
    // The live keys that drive a tenant's sandboxes: its agent and admin
    // keys and every admin key.
    std::vector<ApiKeyRecord> drivers(const std::string& tenant, std::int64_t now);
    // Admin keys that have not expired at `now`.
    std::size_t liveAdmins(std::int64_t now);
    bool empty();

  private:
    Database& db_;
};

}  // namespace airlock

#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

// Where API keys live: a host's SQLite (ApiKeyStore), or in a fleet etcd
// (fleet::FleetApiKeys), so a key minted on one node works on every node
// and a revoked one stops on every node.
class ApiKeys {
  public:
    virtual ~ApiKeys() = default;
    struct Created {
        ApiKeyRecord record;
        std::string key;  // in clear text: shown once
    };
    virtual Created create(const std::string& tenant, Role role, const std::string& name,
                           std::int64_t expiresAt) = 0;
    Created create(const std::string& tenant, Role role, const std::string& name) {
        return create(tenant, role, name, 0);
    }
    // The first admin key ("admin" of tenant admin) when there is no key
    // yet, in one step: of two nodes starting at once, one makes it.
    virtual std::optional<Created> createFirstAdmin() = 0;
    // The key's record if it exists and has not expired at `now`.
    virtual std::optional<ApiKeyRecord> findValid(const std::string& key, std::int64_t now) = 0;
    virtual std::optional<ApiKeyRecord> find(const std::string& id) = 0;
    // Every key, or a tenant's; never the hashes.
    virtual std::vector<ApiKeyRecord> list(const std::optional<std::string>& tenant) = 0;
    // False when there is no such key.
    virtual bool remove(const std::string& id) = 0;
    // The live keys that drive a tenant's sandboxes: its agent and admin
    // keys and every admin key.
    virtual std::vector<ApiKeyRecord> drivers(const std::string& tenant, std::int64_t now) = 0;
    // Admin keys that have not expired at `now`.
    virtual std::size_t liveAdmins(std::int64_t now) = 0;
    virtual bool empty() = 0;
};

}  // namespace airlock

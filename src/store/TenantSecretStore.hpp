#pragma once
#include <optional>
#include <string>
#include <vector>

#include "store/Database.hpp"

namespace airlock {

// A secret a tenant defines once for all its sandboxes: always injected by
// the egress proxy (the guest never holds it), its value sealed (bound to
// tenant and name) by the caller before it gets here.
struct TenantSecretRecord {
    std::string tenant;
    std::string name;
    std::string valueSealed;
    std::vector<std::string> hosts;
    std::string header;  // "": placeholder mode
    std::string format;
    std::vector<std::string> commands;  // command globs whose env holds the placeholder; none: all
    std::string createdAt;
    std::string updatedAt;
};

// Where tenants' secrets are kept: this host's database, or a fleet's etcd
// (fleet::FleetTenantSecrets).
class TenantSecretRecords {
  public:
    virtual ~TenantSecretRecords() = default;
    // Adds or replaces (keeping createdAt); true when it was new.
    virtual bool put(const TenantSecretRecord& s) = 0;
    virtual std::optional<TenantSecretRecord> find(const std::string& tenant,
                                                   const std::string& name) = 0;
    virtual std::vector<TenantSecretRecord> list(const std::string& tenant) = 0;
    virtual bool remove(const std::string& tenant, const std::string& name) = 0;
};

// The record as JSON (how both stores keep it), and back (nullopt: not one).
std::string storedTenantSecretJson(const TenantSecretRecord& s);
std::optional<TenantSecretRecord> storedTenantSecretFromJson(const std::string& text);

class TenantSecretStore final : public TenantSecretRecords {
  public:
    explicit TenantSecretStore(Database& db) : db_(db) {}
    bool put(const TenantSecretRecord& s) override;
    std::optional<TenantSecretRecord> find(const std::string& tenant,
                                           const std::string& name) override;
    std::vector<TenantSecretRecord> list(const std::string& tenant) override;
    bool remove(const std::string& tenant, const std::string& name) override;

  private:
    Database& db_;
};

}  // namespace airlock

#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/Database.hpp"

namespace airlock {

// What a tenant may hold at once; an absent figure is unlimited.
struct TenantQuota {
    std::optional<std::uint64_t> sandboxes;  // running + paused (+ being created)
    std::optional<std::uint64_t> vcpus, memoryMib, diskGib;
    std::optional<std::uint64_t> snapshots;
    std::optional<std::uint64_t> concurrentExecs;
};

// A tenant's settings (PUT /v1/tenants/{name}). Its command rules are the
// floor under every sandbox of the tenant; its network allowlist bounds
// theirs (empty: no bound beyond the operator's).
struct TenantRecord {
    std::string name;
    TenantQuota quota;
    std::vector<std::string> deny, approve, allow;  // command rules
    std::vector<std::string> networkAllow;
    bool networkSet = false;  // whether "network" was ever given
    std::string updatedAt;
};

class TenantStore {
  public:
    explicit TenantStore(Database& db);
    void put(const TenantRecord& t);
    std::optional<TenantRecord> find(const std::string& name);
    std::vector<TenantRecord> list();

  private:
    Database& db_;
};

}  // namespace airlock

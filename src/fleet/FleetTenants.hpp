#pragma once
#include <chrono>
#include <map>
#include <mutex>

#include "controller/SharedUsage.hpp"
#include "fleet/KeyValueStore.hpp"
#include "store/TenantStore.hpp"

namespace airlock::fleet {

// A fleet's tenants in etcd: /airlock/tenants/<name> holds a tenant's
// settings (quota, command rules, network bound, package rules), set
// through any node and read by every node at each create. When etcd cannot
// answer, the settings this node read in the last ten minutes hold (an
// exec's tenant rules keep applying; creates fail on their quota anyway).
class FleetTenants final : public Tenants {
  public:
    explicit FleetTenants(KeyValueStore& store) : store_(store) {}
    void put(const TenantRecord& t) override;
    std::optional<TenantRecord> find(const std::string& name) override;
    std::vector<TenantRecord> list() override;

  private:
    struct Seen {
        std::optional<TenantRecord> record;
        std::chrono::steady_clock::time_point at;
    };
    KeyValueStore& store_;
    std::mutex mutex_;
    std::map<std::string, Seen> seen_;
};

// What each tenant's sandboxes hold across the fleet: one key per sandbox
// under /airlock/usage/<tenant>/sbx/<id> with its figures, and a guard key
// /airlock/usage/<tenant>/guard that every admission rewrites. A create
// reads the guard, sums the tenant's keys, checks the quota, and commits
// its key only if the guard is unchanged: of creates racing on different
// nodes for a tenant's last unit, one commits and the others read again
// and are refused. Usage is the sum of what exists, never a counter that
// can drift; a delete removes its key.
class FleetUsage final : public SharedUsage {
  public:
    explicit FleetUsage(KeyValueStore& store) : store_(store) {}
    TenantUsage usageOf(const std::string& tenant) override;
    void reserve(const SandboxRecord& r, const TenantQuota& quota) override;
    void release(const std::string& tenant, const std::string& id) override;
    void rename(const std::string& tenant, const std::string& from, const std::string& to) override;

  private:
    KeyValueStore& store_;
};

}  // namespace airlock::fleet

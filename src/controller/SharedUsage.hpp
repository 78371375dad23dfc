#pragma once
#include <string>

#include "store/SandboxRecord.hpp"
#include "store/TenantStore.hpp"

namespace airlock {

// What one sandbox adds to its tenant's usage.
inline TenantUsage footprintOf(const SandboxRecord& r) {
    TenantUsage u;
    u.sandboxes = 1;
    u.vcpus = r.vcpus;
    u.memoryMib = r.memoryMib;
    u.diskGib = r.diskBytes / (1024ull * 1024 * 1024);
    return u;
}

// What each tenant's sandboxes hold across a fleet (fleet::FleetUsage):
// a create on any node is admitted against the tenant's quota in one
// transaction of the shared store, so creates racing on different nodes
// never take more than the quota allows. Without it a host counts its own.
class SharedUsage {
  public:
    virtual ~SharedUsage() = default;
    // The tenant's sandboxes, vCPUs, memory and disk on every node.
    virtual TenantUsage usageOf(const std::string& tenant) = 0;
    // Counts r (its figures) if the tenant stays within `quota` with it;
    // Error(quota_exceeded) when it would not, Error(unavailable) when the
    // store cannot answer.
    virtual void reserve(const SandboxRecord& r, const TenantQuota& quota) = 0;
    // r no longer counts (deleted, or its create failed).
    virtual void release(const std::string& tenant, const std::string& id) = 0;
    // The same reservation under another id (a spare VM became the sandbox).
    virtual void rename(const std::string& tenant, const std::string& from,
                        const std::string& to) = 0;
};

}  // namespace airlock

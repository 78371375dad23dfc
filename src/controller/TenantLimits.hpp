#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "controller/TenantExecSlots.hpp"
#include "core/KeyedMutexes.hpp"
#include "policy/CommandPolicy.hpp"
#include "store/SandboxStore.hpp"
#include "store/SnapshotStore.hpp"
#include "controller/SharedUsage.hpp"
#include "store/TenantStore.hpp"

namespace airlock {

// A tenant's bounds on what its sandboxes may be and do: the operator's and
// its own deny and approve rules are the floor under every sandbox's allow
// rules, its network rules bound every sandbox's allowlist, and its quotas
// (sandboxes, vcpus, memory, disk, snapshots, concurrent execs) are checked
// before anything starts. Internal tenants ("_warm", "_spare") have none.
// Locks of its own: one per tenant to check and count in one step
// (quotaLock), and the exec slots'.
class TenantLimits {
  public:
    // tenants: none keeps no tenant records (every tenant unbounded).
    TenantLimits(Tenants* tenants, const policy::PolicyRules& operatorRules,
                 SandboxStore& sandboxes, SnapshotStore& snapshots);

    // The record whose rules and quotas bind a tenant's sandboxes; none for
    // an internal or empty tenant, or when the server keeps no tenants.
    std::optional<TenantRecord> bindingOf(const std::string& tenant) const;
    // The admin's view (PUT, GET /v1/tenants).
    TenantRecord put(TenantRecord t);  // network entries checked (bad_request)
    std::optional<TenantRecord> find(const std::string& name) const;
    std::vector<TenantRecord> list() const;
    // What a tenant holds now: live sandboxes and their resources,
    // snapshots, execs in flight.
    TenantUsage usageOf(const std::string& tenant);

    // Error(forbidden) when a sandbox's allow rules would open what the
    // operator's or its tenant's deny/approve rules close (or every command),
    // or its network allowlist reaches outside the tenant's.
    void requireWithinFloor(const std::string& tenant, const policy::PolicyRules& rules,
                            const std::vector<std::string>& networkAllow) const;

    // Held while a quota is checked and what it counts is written: two
    // creates (or snapshots) at once cannot both take a tenant's last unit.
    std::shared_ptr<std::mutex> quotaLock(const std::string& tenant) {
        return quotaLocks_.of(tenant);
    }
    void requireSandboxQuota(const SandboxRecord& r);  // Error(quota_exceeded)
    // A fleet's shared count (nullptr: this host counts its own).
    void setSharedUsage(SharedUsage* shared) { shared_ = shared; }
    // What requireSandboxQuota counted is gone (the record was removed), or
    // moved to another id; never throws.
    void released(const SandboxRecord& r);
    void renamed(const SandboxRecord& r, const std::string& from);
    void requireSnapshotQuota(const std::string& tenant);
    // Volumes are counted where they live (this host): set once, before serving.
    using VolumeUsage = std::function<std::pair<std::uint64_t, std::uint64_t>(const std::string&)>;
    void setVolumeUsage(VolumeUsage usage) { volumeUsage_ = std::move(usage); }
    // Error(quota_exceeded) when one more volume of sizeGib (or sizeGib more
    // of an existing one: count 0) passes the tenant's volumes or volume_gib.
    void requireVolumeQuota(const std::string& tenant, std::uint64_t count, std::uint64_t sizeGib);
    // One of the tenant's concurrent_execs, released when the last copy goes
    // (Error(quota_exceeded) when none is free).
    using ExecSlot = TenantExecSlots::Slot;
    ExecSlot acquireExecSlot(const std::string& tenant);

  private:
    Tenants* tenants_;
    SharedUsage* shared_ = nullptr;
    const policy::PolicyRules& operatorRules_;
    SandboxStore& sandboxes_;
    SnapshotStore& snapshots_;
    KeyedMutexes quotaLocks_;
    TenantExecSlots execSlots_;
    VolumeUsage volumeUsage_;
};

}  // namespace airlock

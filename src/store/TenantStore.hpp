#pragma once
#include <array>
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
    std::optional<std::uint64_t> volumes, volumeGib;
};

// What a tenant holds now, figure for figure against its quota.
struct TenantUsage {
    std::uint64_t sandboxes = 0, vcpus = 0, memoryMib = 0, diskGib = 0, snapshots = 0,
                  concurrentExecs = 0, volumes = 0, volumeGib = 0;
};

// The quota's figures by their JSON names: the one list the store, the
// request parser and the API's answers all read and write.
struct TenantQuotaField {
    const char* name;
    std::optional<std::uint64_t> TenantQuota::*limit;
    std::uint64_t TenantUsage::*used;
};
inline constexpr std::array<TenantQuotaField, 8> kTenantQuotaFields{{
    {"sandboxes", &TenantQuota::sandboxes, &TenantUsage::sandboxes},
    {"vcpus", &TenantQuota::vcpus, &TenantUsage::vcpus},
    {"memory_mib", &TenantQuota::memoryMib, &TenantUsage::memoryMib},
    {"disk_gib", &TenantQuota::diskGib, &TenantUsage::diskGib},
    {"snapshots", &TenantQuota::snapshots, &TenantUsage::snapshots},
    {"concurrent_execs", &TenantQuota::concurrentExecs, &TenantUsage::concurrentExecs},
    {"volumes", &TenantQuota::volumes, &TenantUsage::volumes},
    {"volume_gib", &TenantQuota::volumeGib, &TenantUsage::volumeGib},
}};

// Error(quota_exceeded) naming the first figure that `adding` (one more
// sandbox's) would take past its limit; `where` says what `used` counts
// ("" on one host, " across the fleet" in a fleet).
void requireRoomFor(const TenantQuota& quota, const TenantUsage& used, const TenantUsage& adding,
                    const std::string& where);

// A tenant's settings (PUT /v1/tenants/{name}). Its command rules are the
// floor under every sandbox of the tenant; its network allowlist bounds
// theirs (empty: no bound beyond the operator's).
struct TenantRecord {
    std::string name;
    TenantQuota quota;
    std::vector<std::string> deny, approve, allow;  // command rules
    std::vector<std::string> networkAllow;
    bool networkSet = false;  // whether "network" was ever given
    // Package rules every sandbox of the tenant starts from (and an agent
    // key may only tighten); "": the built-in defaults.
    std::string packagesJson;
    // The idle rule its sandboxes get when a create names none
    // ({"after_s","action"}; "": none).
    std::string idleJson;
    std::string updatedAt;
};

// Where tenants' settings live: a host's SQLite (TenantStore), or in a
// fleet etcd (fleet::FleetTenants), so a quota set through one node binds
// creates on every node.
class Tenants {
  public:
    virtual ~Tenants() = default;
    virtual void put(const TenantRecord& t) = 0;
    virtual std::optional<TenantRecord> find(const std::string& name) = 0;
    virtual std::vector<TenantRecord> list() = 0;
};

// A tenant's settings as one JSON document (what etcd holds) and back.
std::string tenantJson(const TenantRecord& t);
TenantRecord tenantFromJson(const std::string& name, const std::string& text);

class TenantStore final : public Tenants {
  public:
    explicit TenantStore(Database& db);
    void put(const TenantRecord& t) override;
    std::optional<TenantRecord> find(const std::string& name) override;
    std::vector<TenantRecord> list() override;

  private:
    Database& db_;
};

}  // namespace airlock

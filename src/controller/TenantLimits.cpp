#include "controller/TenantLimits.hpp"

#include <tuple>

#include "controller/DiskLayers.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Log.hpp"
#include "egress/EgressAllowlist.hpp"
#include "store/TenantStore.hpp"

namespace airlock {

namespace {
bool overlaps(const std::string& a, const std::string& b) {
    // Two command globs overlap when either matches the other's text: an
    // allow of "git *" opens "git push*", an allow of "git push --force*" is
    // inside it. Good enough for rules written as prefixes and words.
    return policy::CommandPolicy::globMatch(a, b) || policy::CommandPolicy::globMatch(b, a);
}
}  // namespace

TenantLimits::TenantLimits(Tenants* tenants, const policy::PolicyRules& operatorRules,
                           SandboxStore& sandboxes, SnapshotStore& snapshots)
    : tenants_(tenants),
      operatorRules_(operatorRules),
      sandboxes_(sandboxes),
      snapshots_(snapshots) {}

std::optional<TenantRecord> TenantLimits::bindingOf(const std::string& tenant) const {
    if (!tenants_ || tenant.empty() || tenant[0] == '_') return std::nullopt;
    return tenants_->find(tenant);
}

void TenantLimits::requireWithinFloor(const std::string& tenant, const policy::PolicyRules& rules,
                                      const std::vector<std::string>& networkAllow) const {
    auto t = bindingOf(tenant);
    struct Floor {
        const std::vector<std::string>* rules;
        const char* what;
    };
    const auto& op = operatorRules_;
    std::vector<Floor> floors{{&op.deny, "the operator's deny rule"},
                              {&op.approve, "the operator's approve rule"}};
    if (t) {
        floors.push_back({&t->deny, "the tenant's deny rule"});
        floors.push_back({&t->approve, "the tenant's approve rule"});
    }
    for (const auto& allow : rules.allow) {
        if (allow.find_first_not_of("* ") == std::string::npos)
            throw Error(ErrorCode::forbidden,
                        "policy allow '" + allow +
                            "' would open every command, the default classes' gates too");
        for (const auto& floor : floors)
            for (const auto& rule : *floor.rules)
                if (overlaps(allow, rule))
                    throw Error(ErrorCode::forbidden, "policy allow '" + allow + "' would open " +
                                                          floor.what + " '" + rule + "'");
    }
    if (t && t->networkSet)
        for (const auto& entry : networkAllow) {
            bool covered = false;
            for (const auto& bound : t->networkAllow)
                covered = covered || policy::CommandPolicy::globMatch(bound, entry);
            if (!covered)
                throw Error(ErrorCode::forbidden,
                            "network allow '" + entry + "' is outside the tenant's network rules");
        }
}

TenantUsage TenantLimits::usageOf(const std::string& tenant) {
    TenantUsage u;
    if (shared_ && !tenant.empty() && tenant[0] != '_') {
        u = shared_->usageOf(tenant);
    } else {
        for (const auto& r : sandboxes_.list(TenantScope::only(tenant))) {
            if (r.state != SandboxState::creating && r.state != SandboxState::running &&
                r.state != SandboxState::paused)
                continue;
            ++u.sandboxes;
            u.vcpus += r.vcpus;
            u.memoryMib += r.memoryMib;
            u.diskGib += r.diskBytes / kGiB;
        }
    }
    for (const auto& s : snapshots_.list(TenantScope::only(tenant)))
        if (s.state != SnapshotState::deleted && s.kind == "user") ++u.snapshots;
    u.concurrentExecs = execSlots_.inFlight(tenant);
    if (volumeUsage_) std::tie(u.volumes, u.volumeGib) = volumeUsage_(tenant);
    return u;
}

void TenantLimits::requireVolumeQuota(const std::string& tenant, std::uint64_t count,
                                      std::uint64_t sizeGib) {
    auto t = bindingOf(tenant);
    if (!t) return;
    TenantQuota volumesOnly;  // the sandbox figures are not this call's to check
    volumesOnly.volumes = t->quota.volumes;
    volumesOnly.volumeGib = t->quota.volumeGib;
    TenantUsage adding;
    adding.sandboxes = 0;
    adding.volumes = count;
    adding.volumeGib = sizeGib;
    requireRoomFor(volumesOnly, usageOf(tenant), adding, "");
}

void TenantLimits::requireSandboxQuota(const SandboxRecord& r) {
    // A fleet counts every tenant's sandboxes, quota or not: a quota set
    // later binds what runs already.
    if (shared_ && !r.tenant.empty() && r.tenant[0] != '_') {
        auto t = bindingOf(r.tenant);
        shared_->reserve(r, t ? t->quota : TenantQuota{});
        return;
    }
    auto t = bindingOf(r.tenant);
    if (!t) return;
    requireRoomFor(t->quota, usageOf(r.tenant), footprintOf(r), "");
}

void TenantLimits::released(const SandboxRecord& r) {
    if (!shared_ || r.tenant.empty() || r.tenant[0] == '_') return;
    try {
        shared_->release(r.tenant, r.id);
    } catch (const std::exception& e) {
        logWarn("controller", "the fleet still counts " + r.id + " for " + r.tenant + ": " + e.what());
    }
}

void TenantLimits::renamed(const SandboxRecord& r, const std::string& from) {
    if (!shared_ || r.tenant.empty() || r.tenant[0] == '_' || from == r.id) return;
    try {
        shared_->rename(r.tenant, from, r.id);
    } catch (const std::exception& e) {
        logWarn("controller", "the fleet's count of " + r.tenant + " keeps " + from + ": " + e.what());
    }
}

void TenantLimits::requireSnapshotQuota(const std::string& tenant) {
    auto t = bindingOf(tenant);
    if (!t || !t->quota.snapshots) return;
    auto u = usageOf(tenant);
    if (u.snapshots + 1 > *t->quota.snapshots)
        throw Error(ErrorCode::quota_exceeded, "quota exceeded: snapshots (" +
                                                   std::to_string(u.snapshots) + " of " +
                                                   std::to_string(*t->quota.snapshots) + ")");
}

TenantLimits::ExecSlot TenantLimits::acquireExecSlot(const std::string& tenant) {
    auto t = bindingOf(tenant);
    return execSlots_.acquire(tenant, t ? t->quota.concurrentExecs : std::nullopt);
}

TenantRecord TenantLimits::put(TenantRecord t) {
    if (!tenants_) throw Error(ErrorCode::internal, "this server keeps no tenants");
    if (t.networkSet) egress::EgressAllowlist::parse(t.networkAllow);  // bad entries: bad_request
    t.updatedAt = nowTimestamp();
    tenants_->put(t);
    return t;
}

std::optional<TenantRecord> TenantLimits::find(const std::string& name) const {
    return tenants_ ? tenants_->find(name) : std::nullopt;
}

std::vector<TenantRecord> TenantLimits::list() const {
    return tenants_ ? tenants_->list() : std::vector<TenantRecord>{};
}

}  // namespace airlock

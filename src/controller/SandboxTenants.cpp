// Tenants (SandboxController): their command rules are the floor under every
// sandbox's own, their network allowlist bounds the sandboxes', and their
// quotas are checked before anything starts.
#include "controller/SandboxController.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
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

std::optional<TenantRecord> SandboxController::tenantOf(const std::string& tenant) const {
    if (!config_.tenants || tenant.empty() || tenant[0] == '_') return std::nullopt;
    return config_.tenants->find(tenant);
}

void SandboxController::requireWithinFloor(const std::string& tenant,
                                           const policy::PolicyRules& rules,
                                           const std::vector<std::string>& networkAllow) const {
    auto t = tenantOf(tenant);
    struct Floor {
        const std::vector<std::string>* rules;
        const char* what;
    };
    const auto& op = config_.operatorRules;
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

TenantUsage SandboxController::usageOf(const std::string& tenant) {
    TenantUsage u;
    for (const auto& r : store_.list(TenantScope::only(tenant))) {
        if (r.state != SandboxState::creating && r.state != SandboxState::running &&
            r.state != SandboxState::paused)
            continue;
        ++u.sandboxes;
        u.vcpus += r.vcpus;
        u.memoryMib += r.memoryMib;
        u.diskGib += r.diskBytes / kGiB;
    }
    for (const auto& s : snapshots_.list(TenantScope::only(tenant)))
        if (s.state != SnapshotState::deleted) ++u.snapshots;
    u.concurrentExecs = execSlots_.inFlight(tenant);
    return u;
}

void SandboxController::requireSandboxQuota(const SandboxRecord& r) {
    auto t = tenantOf(r.tenant);
    if (!t) return;
    auto u = usageOf(r.tenant);
    auto check = [&](const char* name, const std::optional<std::uint64_t>& limit,
                     std::uint64_t used, std::uint64_t adding) {
        if (limit && used + adding > *limit)
            throw Error(ErrorCode::quota_exceeded, std::string("quota exceeded: ") + name + " (" +
                                                       std::to_string(used) + " in use + " +
                                                       std::to_string(adding) + " > " +
                                                       std::to_string(*limit) + ")");
    };
    check("sandboxes", t->quota.sandboxes, u.sandboxes, 1);
    check("vcpus", t->quota.vcpus, u.vcpus, r.vcpus);
    check("memory_mib", t->quota.memoryMib, u.memoryMib, r.memoryMib);
    check("disk_gib", t->quota.diskGib, u.diskGib, r.diskBytes / kGiB);
}

void SandboxController::requireSnapshotQuota(const std::string& tenant) {
    auto t = tenantOf(tenant);
    if (!t || !t->quota.snapshots) return;
    auto u = usageOf(tenant);
    if (u.snapshots + 1 > *t->quota.snapshots)
        throw Error(ErrorCode::quota_exceeded, "quota exceeded: snapshots (" +
                                                   std::to_string(u.snapshots) + " of " +
                                                   std::to_string(*t->quota.snapshots) + ")");
}

SandboxController::ExecSlot SandboxController::acquireExecSlot(const std::string& tenant) {
    auto t = tenantOf(tenant);
    return execSlots_.acquire(tenant, t ? t->quota.concurrentExecs : std::nullopt);
}

TenantRecord SandboxController::putTenant(TenantRecord t) {
    if (!config_.tenants) throw Error(ErrorCode::internal, "this server keeps no tenants");
    if (t.networkSet) egress::EgressAllowlist::parse(t.networkAllow);  // bad entries: bad_request
    t.updatedAt = nowTimestamp();
    config_.tenants->put(t);
    return t;
}

std::optional<TenantRecord> SandboxController::findTenant(const std::string& name) {
    return config_.tenants ? config_.tenants->find(name) : std::nullopt;
}

std::vector<TenantRecord> SandboxController::listTenants() {
    return config_.tenants ? config_.tenants->list() : std::vector<TenantRecord>{};
}

}  // namespace airlock

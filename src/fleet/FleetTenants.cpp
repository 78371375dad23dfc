#include "fleet/FleetTenants.hpp"

#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "core/Error.hpp"
#include "protocol/JsonText.hpp"

namespace airlock::fleet {

using json = nlohmann::json;

namespace {
const std::string kTenants = "/airlock/tenants/";
const std::string kUsage = "/airlock/usage/";
constexpr std::uint64_t kGiB = 1ull << 30;

// Tenant names are [a-z0-9-_] (the API checks); anything else names no key.
bool plainName(const std::string& s) {
    return !s.empty() && s.size() <= 128 && s.find('/') == std::string::npos;
}
std::string usagePrefix(const std::string& tenant) { return kUsage + tenant + "/sbx/"; }
std::string guardKey(const std::string& tenant) { return kUsage + tenant + "/guard"; }
std::string figures(const SandboxRecord& r) {
    return jsonText(
        json{{"vcpus", r.vcpus}, {"memory_mib", r.memoryMib}, {"disk_gib", r.diskBytes / kGiB}});
}
void add(TenantUsage& u, const std::string& text) {
    auto j = json::parse(text, nullptr, false);
    ++u.sandboxes;
    if (!j.is_object()) return;
    u.vcpus += j.value("vcpus", std::uint64_t(0));
    u.memoryMib += j.value("memory_mib", std::uint64_t(0));
    u.diskGib += j.value("disk_gib", std::uint64_t(0));
}
}  // namespace

void FleetTenants::put(const TenantRecord& t) {
    if (!plainName(t.name)) throw Error(ErrorCode::bad_request, "bad tenant name");
    store_.put(kTenants + t.name, tenantJson(t));
}

std::optional<TenantRecord> FleetTenants::find(const std::string& name) {
    if (!plainName(name)) return std::nullopt;
    std::optional<TenantRecord> t;
    try {
        auto kv = store_.get(kTenants + name);
        if (kv) t = tenantFromJson(name, kv->value);
    } catch (const Error& e) {
        if (e.code() != ErrorCode::unavailable) throw;
        std::lock_guard lock(mutex_);
        auto it = seen_.find(name);
        if (it == seen_.end() ||
            std::chrono::steady_clock::now() - it->second.at > std::chrono::minutes(10))
            throw;
        return it->second.record;
    }
    std::lock_guard lock(mutex_);
    if (seen_.size() > 100000) seen_.clear();
    seen_[name] = Seen{t, std::chrono::steady_clock::now()};
    return t;
}

std::vector<TenantRecord> FleetTenants::list() {
    std::vector<TenantRecord> out;
    for (const auto& kv : store_.list(kTenants))
        out.push_back(tenantFromJson(kv.key.substr(kTenants.size()), kv.value));
    return out;
}

TenantUsage FleetUsage::usageOf(const std::string& tenant) {
    TenantUsage u;
    if (!plainName(tenant)) return u;
    for (const auto& kv : store_.list(usagePrefix(tenant))) add(u, kv.value);
    return u;
}

void FleetUsage::reserve(const SandboxRecord& r, const TenantQuota& quota) {
    if (!plainName(r.tenant)) throw Error(ErrorCode::bad_request, "bad tenant name");
    std::minstd_rand jitter(std::random_device{}());
    for (int attempt = 0; attempt < 50; ++attempt) {
        auto guard = store_.get(guardKey(r.tenant));
        TenantUsage u;
        for (const auto& kv : store_.list(usagePrefix(r.tenant)))
            if (kv.key != usagePrefix(r.tenant) + r.id) add(u, kv.value);
        requireRoomFor(quota, u, footprintOf(r), " across the fleet");
        KeyCompare unchanged = guard
                                   ? KeyCompare::modRevision(guardKey(r.tenant), guard->modRevision)
                                   : KeyCompare::absent(guardKey(r.tenant));
        if (store_
                .txn({unchanged},
                     {KeyOp::put(guardKey(r.tenant), r.id),
                      KeyOp::put(usagePrefix(r.tenant) + r.id, figures(r))},
                     {})
                .succeeded)
            return;
        // Another node admitted one of the tenant's creates meanwhile: read again.
        std::this_thread::sleep_for(std::chrono::milliseconds(1 + jitter() % 20));
    }
    throw Error(ErrorCode::unavailable,
                "too many creates of tenant " + r.tenant + " at once across the fleet; try again");
}

void FleetUsage::release(const std::string& tenant, const std::string& id) {
    if (!plainName(tenant)) return;
    store_.remove(usagePrefix(tenant) + id);
}

void FleetUsage::rename(const std::string& tenant, const std::string& from, const std::string& to) {
    if (!plainName(tenant)) return;
    auto kv = store_.get(usagePrefix(tenant) + from);
    if (!kv) return;
    store_.txn({KeyCompare::modRevision(usagePrefix(tenant) + from, kv->modRevision)},
               {KeyOp::remove(usagePrefix(tenant) + from),
                KeyOp::put(usagePrefix(tenant) + to, kv->value)},
               {});
}

}  // namespace airlock::fleet

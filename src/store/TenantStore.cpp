#include "store/TenantStore.hpp"

#include <nlohmann/json.hpp>

#include "core/Error.hpp"

namespace airlock {

namespace {
using nlohmann::json;

json quotaToJson(const TenantQuota& q) {
    json j = json::object();
    for (const auto& f : kTenantQuotaFields)
        if (q.*f.limit) j[f.name] = *(q.*f.limit);
    return j;
}

TenantQuota quotaFromJson(const json& j) {
    TenantQuota q;
    for (const auto& f : kTenantQuotaFields)
        if (j.is_object() && j.contains(f.name) && j[f.name].is_number_unsigned())
            q.*f.limit = j[f.name].get<std::uint64_t>();
    return q;
}

std::vector<std::string> strings(const json& j, const char* k) {
    std::vector<std::string> out;
    if (j.is_object() && j.contains(k) && j[k].is_array())
        for (const auto& v : j[k])
            if (v.is_string()) out.push_back(v.get<std::string>());
    return out;
}

constexpr const char* kTenantSelect =
    "SELECT name, quota, policy, network, updated_at, packages, idle FROM tenants";

TenantRecord readTenantRow(const Database::Statement& st) {
    TenantRecord t;
    t.name = st.text(0);
    t.quota = quotaFromJson(json::parse(st.text(1), nullptr, false));
    json policy = json::parse(st.text(2), nullptr, false);
    t.deny = strings(policy, "deny");
    t.approve = strings(policy, "approve");
    t.allow = strings(policy, "allow");
    json network = json::parse(st.text(3), nullptr, false);
    t.networkSet = network.is_object() && network.contains("allow");
    t.networkAllow = strings(network, "allow");
    t.updatedAt = st.text(4);
    t.packagesJson = st.text(5);
    t.idleJson = st.text(6);
    return t;
}
}  // namespace

void requireRoomFor(const TenantQuota& quota, const TenantUsage& used, const TenantUsage& adding,
                    const std::string& where) {
    for (const auto& f : kTenantQuotaFields) {
        const auto& limit = quota.*(f.limit);
        if (adding.*(f.used) == 0 && f.used != &TenantUsage::sandboxes) continue;
        if (limit && used.*(f.used) + adding.*(f.used) > *limit)
            throw Error(ErrorCode::quota_exceeded,
                        std::string("quota exceeded: ") + f.name + " (" +
                            std::to_string(used.*(f.used)) + " in use" + where + " + " +
                            std::to_string(adding.*(f.used)) + " > " + std::to_string(*limit) + ")");
    }
}

std::string tenantJson(const TenantRecord& t) {
    json policy{{"deny", t.deny}, {"approve", t.approve}, {"allow", t.allow}};
    json network = t.networkSet ? json{{"allow", t.networkAllow}} : json::object();
    return json{{"quota", quotaToJson(t.quota)},
                {"policy", policy},
                {"network", network},
                {"packages", t.packagesJson},
                {"idle", t.idleJson},
                {"updated_at", t.updatedAt}}
        .dump();
}

TenantRecord tenantFromJson(const std::string& name, const std::string& text) {
    json j = json::parse(text, nullptr, false);
    TenantRecord t;
    t.name = name;
    if (!j.is_object()) return t;
    t.quota = quotaFromJson(j.value("quota", json::object()));
    json policy = j.value("policy", json::object());
    t.deny = strings(policy, "deny");
    t.approve = strings(policy, "approve");
    t.allow = strings(policy, "allow");
    json network = j.value("network", json::object());
    t.networkSet = network.is_object() && network.contains("allow");
    t.networkAllow = strings(network, "allow");
    t.packagesJson = j.value("packages", "");
    t.idleJson = j.value("idle", "");
    t.updatedAt = j.value("updated_at", "");
    return t;
}

TenantStore::TenantStore(Database& db) : db_(db) {}

void TenantStore::put(const TenantRecord& t) {
    json policy{{"deny", t.deny}, {"approve", t.approve}, {"allow", t.allow}};
    json network = t.networkSet ? json{{"allow", t.networkAllow}} : json::object();
    db_.run(
        "INSERT OR REPLACE INTO tenants (name, quota, policy, network, updated_at, packages, idle)"
        " VALUES (?,?,?,?,?,?,?)",
        t.name, quotaToJson(t.quota).dump(), policy.dump(), network.dump(), t.updatedAt,
        t.packagesJson, t.idleJson);
}

std::optional<TenantRecord> TenantStore::find(const std::string& name) {
    return db_.one(std::string(kTenantSelect) + " WHERE name = ?", readTenantRow, name);
}

std::vector<TenantRecord> TenantStore::list() {
    return db_.all(std::string(kTenantSelect) + " ORDER BY name", readTenantRow);
}

}  // namespace airlock

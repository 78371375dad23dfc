#include "store/TenantStore.hpp"

#include <nlohmann/json.hpp>

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

TenantRecord readRow(Database::Statement& st) {
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
    return t;
}
}  // namespace

TenantStore::TenantStore(Database& db) : db_(db) {
    db_.exec(
        "CREATE TABLE IF NOT EXISTS tenants (name TEXT PRIMARY KEY, quota TEXT NOT NULL, policy "
        "TEXT NOT NULL,"
        " network TEXT NOT NULL, updated_at TEXT NOT NULL)");
    db_.addColumnIfMissing("tenants", "packages TEXT NOT NULL DEFAULT ''");
}

void TenantStore::put(const TenantRecord& t) {
    json policy{{"deny", t.deny}, {"approve", t.approve}, {"allow", t.allow}};
    json network = t.networkSet ? json{{"allow", t.networkAllow}} : json::object();
    db_.locked([&](sqlite3* db) {
        Database::Statement st(
            db,
            "INSERT OR REPLACE INTO tenants (name, quota, policy, network, updated_at, packages)"
            " VALUES (?,?,?,?,?,?)");
        st.bind(1, t.name)
            .bind(2, quotaToJson(t.quota).dump())
            .bind(3, policy.dump())
            .bind(4, network.dump());
        st.bind(5, t.updatedAt).bind(6, t.packagesJson);
        st.step();
    });
}

std::optional<TenantRecord> TenantStore::find(const std::string& name) {
    return db_.locked([&](sqlite3* db) -> std::optional<TenantRecord> {
        Database::Statement st(
            db, "SELECT name, quota, policy, network, updated_at, packages FROM tenants WHERE name = ?");
        st.bind(1, name);
        if (!st.step()) return std::nullopt;
        return readRow(st);
    });
}

std::vector<TenantRecord> TenantStore::list() {
    return db_.locked([&](sqlite3* db) {
        std::vector<TenantRecord> out;
        Database::Statement st(
            db, "SELECT name, quota, policy, network, updated_at, packages FROM tenants ORDER BY name");
        while (st.step()) out.push_back(readRow(st));
        return out;
    });
}

}  // namespace airlock

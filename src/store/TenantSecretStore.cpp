#include "store/TenantSecretStore.hpp"

#include <nlohmann/json.hpp>

namespace airlock {

std::string storedTenantSecretJson(const TenantSecretRecord& s) {
    return nlohmann::json{{"tenant", s.tenant},
                          {"name", s.name},
                          {"value_sealed", s.valueSealed},
                          {"hosts", s.hosts},
                          {"header", s.header},
                          {"format", s.format},
                          {"commands", s.commands},
                          {"created_at", s.createdAt},
                          {"updated_at", s.updatedAt}}
        .dump();
}

std::optional<TenantSecretRecord> storedTenantSecretFromJson(const std::string& text) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object()) return std::nullopt;
    try {
        return TenantSecretRecord{j.at("tenant").get<std::string>(),
                                  j.at("name").get<std::string>(),
                                  j.at("value_sealed").get<std::string>(),
                                  j.at("hosts").get<std::vector<std::string>>(),
                                  j.at("header").get<std::string>(),
                                  j.at("format").get<std::string>(),
                                  j.at("commands").get<std::vector<std::string>>(),
                                  j.at("created_at").get<std::string>(),
                                  j.at("updated_at").get<std::string>()};
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

bool TenantSecretStore::put(const TenantSecretRecord& s) {
    auto before = find(s.tenant, s.name);
    TenantSecretRecord kept = s;
    if (before) kept.createdAt = before->createdAt;
    db_.run("INSERT OR REPLACE INTO tenant_secrets (tenant, name, json) VALUES (?,?,?)", s.tenant,
            s.name, storedTenantSecretJson(kept));
    return !before;
}

namespace {
std::optional<TenantSecretRecord> tenantSecretRowOf(const Database::Statement& st) {
    return storedTenantSecretFromJson(st.text(0));
}
}  // namespace

std::optional<TenantSecretRecord> TenantSecretStore::find(const std::string& tenant,
                                                          const std::string& name) {
    auto row = db_.one("SELECT json FROM tenant_secrets WHERE tenant = ? AND name = ?",
                       tenantSecretRowOf, tenant, name);
    return row ? *row : std::nullopt;
}

std::vector<TenantSecretRecord> TenantSecretStore::list(const std::string& tenant) {
    std::vector<TenantSecretRecord> out;
    for (auto& row : db_.all("SELECT json FROM tenant_secrets WHERE tenant = ? ORDER BY name",
                             tenantSecretRowOf, tenant))
        if (row) out.push_back(std::move(*row));
    return out;
}

bool TenantSecretStore::remove(const std::string& tenant, const std::string& name) {
    return db_.run("DELETE FROM tenant_secrets WHERE tenant = ? AND name = ?", tenant, name) > 0;
}

}  // namespace airlock

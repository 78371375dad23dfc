#include "fleet/FleetTenantSecrets.hpp"

#include <algorithm>

#include "core/Error.hpp"

namespace airlock::fleet {

bool FleetTenantSecrets::put(const TenantSecretRecord& s) {
    auto key = keyOf(s.tenant, s.name);
    // A replacement keeps when it was made, and only over what it read: two
    // nodes replacing at once both land, one after the other.
    for (int attempt = 0; attempt < 8; ++attempt) {
        auto before = store_.get(key);
        TenantSecretRecord kept = s;
        std::vector<KeyCompare> unchanged{KeyCompare::absent(key)};
        if (before) {
            if (auto old = storedTenantSecretFromJson(before->value))
                kept.createdAt = old->createdAt;
            unchanged = {KeyCompare::modRevision(key, before->modRevision)};
        }
        if (store_.txn(unchanged, {KeyOp::put(key, storedTenantSecretJson(kept))}, {}).succeeded)
            return !before;
    }
    throw Error(ErrorCode::conflict, "secret " + s.name + " is being changed elsewhere; try again");
}

std::optional<TenantSecretRecord> FleetTenantSecrets::find(const std::string& tenant,
                                                           const std::string& name) {
    auto kv = store_.get(keyOf(tenant, name));
    if (!kv) return std::nullopt;
    auto s = storedTenantSecretFromJson(kv->value);
    // What the key names and what the record says agree, or it is none.
    if (!s || s->tenant != tenant || s->name != name) return std::nullopt;
    return s;
}

std::vector<TenantSecretRecord> FleetTenantSecrets::list(const std::string& tenant) {
    std::vector<TenantSecretRecord> out;
    for (const auto& kv : store_.list(std::string(kPrefix) + tenant + "/"))
        if (auto s = storedTenantSecretFromJson(kv.value); s && s->tenant == tenant)
            out.push_back(*s);
    std::sort(out.begin(), out.end(), [](const TenantSecretRecord& a, const TenantSecretRecord& b) {
        return a.name < b.name;
    });
    return out;
}

bool FleetTenantSecrets::remove(const std::string& tenant, const std::string& name) {
    return store_.remove(keyOf(tenant, name));
}

}  // namespace airlock::fleet

#include "fleet/FleetCredentials.hpp"

#include <algorithm>

namespace airlock::fleet {

bool FleetCredentials::insert(const CredentialRecord& c) {
    auto key = keyOf(c.tenant, c.name);
    return store_.txn({KeyCompare::absent(key)}, {KeyOp::put(key, storedCredentialJson(c))}, {})
        .succeeded;
}

std::optional<CredentialRecord> FleetCredentials::find(const std::string& tenant,
                                                       const std::string& name) {
    auto kv = store_.get(keyOf(tenant, name));
    if (!kv) return std::nullopt;
    auto c = storedCredentialFromJson(kv->value);
    // What the key names and what the record says agree, or it is none.
    if (!c || c->tenant != tenant || c->name != name) return std::nullopt;
    return c;
}

std::vector<CredentialRecord> FleetCredentials::list(const std::string& tenant) {
    std::vector<CredentialRecord> out;
    for (const auto& kv : store_.list(std::string(kPrefix) + tenant + "/"))
        if (auto c = storedCredentialFromJson(kv.value); c && c->tenant == tenant)
            out.push_back(*c);
    std::sort(out.begin(), out.end(),
              [](const CredentialRecord& a, const CredentialRecord& b) { return a.name < b.name; });
    return out;
}

bool FleetCredentials::remove(const std::string& tenant, const std::string& name) {
    return store_.remove(keyOf(tenant, name));
}

}  // namespace airlock::fleet

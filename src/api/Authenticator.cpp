#include "api/Authenticator.hpp"

#include "core/Clock.hpp"
#include "core/Error.hpp"

namespace airlock::api {

std::string callerName(const Principal& who) {
    return "key:" + who.keyId + " (" + who.keyName + ", " + roleName(who.role) + ")";
}

Principal Authenticator::principalFor(const std::string& header) {
    static const std::string kBearer = "Bearer ";
    if (header.empty())
        throw Error(ErrorCode::unauthorized, "missing API key (Authorization: Bearer KEY)");
    if (header.rfind(kBearer, 0) != 0)
        throw Error(ErrorCode::unauthorized, "Authorization must be 'Bearer KEY'");
    return principalForKey(header.substr(kBearer.size()));
}

Principal Authenticator::principalForE2bKey(const std::string& xApiKey) {
    if (xApiKey.empty()) throw Error(ErrorCode::unauthorized, "missing API key (X-API-KEY)");
    if (xApiKey.rfind("e2b_", 0) == 0) return principalForKey("ak_" + xApiKey.substr(4));
    return principalForKey(xApiKey);
}

std::optional<Principal> Authenticator::activeKey(const std::string& keyId) {
    if (keyId.empty()) return std::nullopt;
    auto key = keys_.find(keyId);
    if (!key || (key->expiresAt > 0 && key->expiresAt <= nowUnixSeconds())) return std::nullopt;
    return Principal{key->id, key->name, key->tenant, key->role, {}};
}

std::vector<Principal> Authenticator::driversOf(const std::string& tenant) {
    std::vector<Principal> out;
    for (const auto& k : keys_.drivers(tenant, nowUnixSeconds()))
        out.push_back(Principal{k.id, k.name, k.tenant, k.role, {}});
    return out;
}

Principal Authenticator::principalForKey(const std::string& clear) {
    auto key = keys_.findValid(clear, nowUnixSeconds());
    if (!key) throw Error(ErrorCode::unauthorized, "invalid, revoked or expired API key");
    return Principal{key->id, key->name, key->tenant, key->role, {}};
}

}  // namespace airlock::api

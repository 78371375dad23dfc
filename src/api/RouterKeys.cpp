// The key routes (admin only): mint a key with a role for a tenant, list
// keys without their secrets, revoke one at once.
#include "api/RequestParsing.hpp"
#include "api/Router.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Log.hpp"

namespace airlock::api {

namespace {
ApiResponse keysJsonResponse(int status, const nlohmann::json& j) {
    return ApiResponse{status, "application/json", j.dump() + "\n"};
}
}  // namespace

void Router::addKeyRoutes() {
    add("POST", "/v1/keys", kAdmins, [this](Context& c) {
        auto request = parseKeyRequest(c.request.body, nowUnixSeconds());
        auto created = keys_.create(request.tenant, request.role, request.name, request.expiresAt);
        logInfo("api", "key " + created.record.id + " (" + roleName(request.role) + " of " +
                           request.tenant + ") created by " + c.principal.keyId);
        auto j = keyJson(created.record);
        j["key"] = created.key;  // shown once: only its hash is kept
        return keysJsonResponse(201, j);
    });
    add("GET", "/v1/keys", kAdmins, [this](Context& c) {
        std::optional<std::string> tenant;
        if (c.request.query.count("tenant")) {
            tenant = c.request.query.at("tenant");
            if (!isValidTenantName(*tenant)) throw Error(ErrorCode::bad_request, "bad tenant name");
        }
        nlohmann::json list = nlohmann::json::array();
        for (const auto& k : keys_.list(tenant)) list.push_back(keyJson(k));
        return keysJsonResponse(200, {{"keys", list}});
    });
    add("DELETE", "/v1/keys/{}", kAdmins, [this](Context& c) {
        auto key = keys_.find(c.params[0]);
        if (!key) throw Error(ErrorCode::not_found, "no key " + c.params[0]);
        // Nobody could make keys again.
        if (key->role == Role::admin &&
            (key->expiresAt == 0 || key->expiresAt > nowUnixSeconds()) &&
            keys_.liveAdmins(nowUnixSeconds()) <= 1)
            throw Error(ErrorCode::conflict, "key " + key->id + " is the last admin key");
        if (!keys_.remove(key->id)) throw Error(ErrorCode::not_found, "no key " + c.params[0]);
        logInfo("api", "key " + key->id + " revoked by " + c.principal.keyId);
        return ApiResponse{204, "", ""};
    });
}

}  // namespace airlock::api

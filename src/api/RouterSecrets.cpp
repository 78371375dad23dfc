// A tenant's injected secrets: defined once by its admin for all its
// sandboxes, answered without their values; each change reaches the
// tenant's running sandboxes on every node.
#include <future>

#include "api/ErrorMapping.hpp"
#include "api/RequestParsing.hpp"
#include "api/Router.hpp"
#include "controller/TenantSecrets.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/JsonFields.hpp"
#include "core/Log.hpp"
#include "fleet/Fleet.hpp"
#include "fleet/HttpExchange.hpp"
#include "fleet/NodeCredential.hpp"

namespace airlock::api {
using nlohmann::json;

namespace {
json tenantSecretJson(const TenantSecretRecord& s) {
    bool header = !s.header.empty();
    return {{"name", s.name},
            {"inject",
             {{"hosts", s.hosts},
              {"header", header ? json(s.header) : json(nullptr)},
              {"format", header ? json(s.format) : json(nullptr)}}},
            {"mode", header ? "header" : "placeholder"},
            {"commands", s.commands},
            {"created_at", s.createdAt},
            {"updated_at", s.updatedAt}};
}
}  // namespace

TenantSecrets& Router::tenantSecrets() {
    if (!tenantSecrets_)
        throw Error(ErrorCode::unavailable, "tenant secrets are not enabled on this server");
    return *tenantSecrets_;
}

json Router::applyTenantSecret(Context& c, const std::string& name) {
    json out{{"sandboxes_updated", services_.sandboxes.applyTenantSecret(c.tenant, name)}};
    json missed = json::array();
    if (fleet_) {
        // Every other node takes it into its own (at once, each bounded).
        std::string target = "/v1/internal/secrets/" + name + "/apply";
        auto caller = carriedCaller(c.principal);
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        std::map<std::string, std::future<fleet::HttpAnswer>> asked;
        for (const auto& node : fleet_->nodes()) {
            if (node.name == fleet_->self()) continue;
            auto peer = node.up ? fleet_->peer(node.name) : std::nullopt;
            if (!peer) {
                missed.push_back(node.name);
                continue;
            }
            auto headers = fleet_->credential().sign(fleet_->self(), node.name, "POST", target,
                                                     caller, nowUnixSeconds());
            asked[node.name] =
                std::async(std::launch::async, [peer = *peer, headers, target, deadline] {
                    return fleet::httpExchange(peer, "POST", target, headers, "{}", deadline);
                });
        }
        for (auto& [node, pending] : asked) {
            auto answer = pending.get();
            auto body = json::parse(answer.body, nullptr, false);
            if (answer.outcome == fleet::HttpOutcome::answered && answer.status == 200 &&
                body.is_object() && body["sandboxes_updated"].is_number_unsigned()) {
                out["sandboxes_updated"] = out["sandboxes_updated"].get<std::size_t>() +
                                           body["sandboxes_updated"].get<std::size_t>();
                continue;
            }
            logWarn("fleet", "node " + node + " did not take tenant secret " + name + ": " +
                                 (answer.why.empty() ? "status " + std::to_string(answer.status)
                                                     : answer.why));
            missed.push_back(node);
        }
    }
    // A node that missed it takes the tenant's secrets as they are at its
    // sandboxes' next create or move; its running ones keep what they had.
    out["nodes_missed"] = missed;
    return out;
}

// PUT /v1/secrets/{}
ApiResponse Router::putTenantSecret(Context& c) {
    // The body is what a create's "secrets" holds for this name.
    auto parsed = parseSecrets(json{{c.params[0], parseJsonBody(c.request.body)}});
    const auto& [name, secret] = *parsed.begin();
    bool added = tenantSecrets().set(c.tenant, name, secret, c.principal.keyId);
    auto out = tenantSecretJson(tenantSecrets().get(c.tenant, name));
    out.update(applyTenantSecret(c, name));
    return jsonResponse(added ? 201 : 200, out);
}

// GET /v1/secrets
ApiResponse Router::listTenantSecrets(Context& c) {
    json list = json::array();
    for (const auto& s : tenantSecrets().list(c.tenant)) list.push_back(tenantSecretJson(s));
    return jsonResponse(200, {{"secrets", list}});
}

// GET /v1/secrets/{}
ApiResponse Router::getTenantSecret(Context& c) {
    return jsonResponse(200, tenantSecretJson(tenantSecrets().get(c.tenant, c.params[0])));
}

// DELETE /v1/secrets/{}
ApiResponse Router::deleteTenantSecret(Context& c) {
    const std::string& name = c.params[0];
    parseSecrets(json{{name, "placeholder-for-name-check"}});  // a bad name is a 400
    bool removed = tenantSecrets().remove(c.tenant, name, c.principal.keyId);
    // Pushed even when it was gone already: a DELETE retried after a push
    // that failed halfway still takes it out of every sandbox.
    auto applied = applyTenantSecret(c, name);
    if (!removed && applied["sandboxes_updated"] == 0)
        throw Error(ErrorCode::not_found, "no secret " + name);
    return jsonResponse(200, applied);
}

// POST /v1/internal/secrets/{}/apply: another node changed it.
ApiResponse Router::applyTenantSecretHere(Context& c) {
    if (c.principal.forwardedBy.empty())
        throw Error(ErrorCode::forbidden, "only another node of the fleet asks this");
    return jsonResponse(
        200, {{"sandboxes_updated", services_.sandboxes.applyTenantSecret(c.tenant, c.params[0])}});
}

}  // namespace airlock::api

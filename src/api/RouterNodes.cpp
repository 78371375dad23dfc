// GET /v1/nodes: the fleet's nodes, up or down, with what each has room for.
#include <nlohmann/json.hpp>
#include <set>

#include "api/ErrorMapping.hpp"
#include "api/Router.hpp"
#include "core/Clock.hpp"
#include "core/Log.hpp"
#include "fleet/Fleet.hpp"
#include "fleet/HttpExchange.hpp"
#include "fleet/NodeMembership.hpp"

namespace airlock::api {

namespace {
nlohmann::json nodeJson(const fleet::NodeStatus& s, bool self) {
    const auto& c = s.record.capacity;
    // A draining node is still up; its health says so, and "draining" too.
    std::string health = !s.up ? "down" : s.draining ? "draining" : "healthy";
    nlohmann::json j{{"name", s.record.name},  {"url", s.record.url}, {"health", health},
                     {"draining", s.draining}, {"self", self},        {"sandboxes", c.sandboxes}};
    if (s.up) {
        j["version"] = s.record.version;
        j["started_at"] = s.record.started;
        j["epoch"] = s.epoch;
        j["capacity"] = {{"vcpus", c.vcpus},
                         {"free_vcpus", c.freeVcpus},
                         {"memory_mib", c.memoryMib},
                         {"free_memory_mib", c.freeMemoryMib},
                         {"accel", c.accel},
                         {"templates", c.templates},
                         {"warm_templates", c.warmTemplates},
                         {"snapshots", c.snapshots.size()}};
    }
    return j;
}
}  // namespace

// GET /v1/nodes
ApiResponse Router::listNodes(Context&) {
    nlohmann::json nodes = nlohmann::json::array();
    if (!membership_) {
        fleet::NodeStatus local;
        local.record.name = "local";
        local.record.version = version_;
        local.up = true;
        if (localCapacity_) local.record.capacity = localCapacity_();
        nodes.push_back(nodeJson(local, true));
        return jsonResponse(200, {{"cluster", false}, {"nodes", nodes}});
    }
    for (const auto& s : membership_->nodes())
        nodes.push_back(nodeJson(s, s.record.name == membership_->name()));
    return jsonResponse(200, {{"cluster", true}, {"self", membership_->name()}, {"nodes", nodes}});
}

nlohmann::json Router::withNode(nlohmann::json sandbox) const {
    if (fleet_) sandbox["node"] = fleet_->self();
    return sandbox;
}

void Router::addFleetSandboxes(Context& c, nlohmann::json& list) {
    // Each other node lists its own, for this caller (signed in, so the
    // node answers as it would the caller; a signed call does not fan out).
    std::set<std::string> answered{fleet_->self()};
    fleet::ForwardedCaller caller{c.principal.keyId, c.principal.keyName, c.principal.tenant,
                                  std::string(roleName(c.principal.role))};
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (const auto& node : fleet_->nodes()) {
        if (node.name == fleet_->self() || !node.up) continue;
        fleet::HttpPeer peer;
        bool tls = false;
        if (!fleet::parseOrigin(node.url, tls, peer.host, peer.port) || tls) continue;
        auto headers = fleet_->credential().sign(fleet_->self(), "GET", "/v1/sandboxes", caller,
                                                 nowUnixSeconds());
        auto answer = fleet::httpExchange(peer, "GET", "/v1/sandboxes", headers, {}, deadline);
        auto body = nlohmann::json::parse(answer.body, nullptr, false);
        if (answer.outcome != fleet::HttpOutcome::answered || answer.status != 200 ||
            !body.is_object() || !body.contains("sandboxes") || !body["sandboxes"].is_array()) {
            logWarn("fleet", "listing node " + node.name + "'s sandboxes: " +
                                 (answer.why.empty() ? "status " + std::to_string(answer.status)
                                                     : answer.why));
            continue;
        }
        answered.insert(node.name);
        for (auto& s : body["sandboxes"]) list.push_back(std::move(s));
    }
    // What a node that did not answer holds: known from the fleet's
    // records, unavailable until it is back.
    for (const auto& placed : fleet_->directory().list()) {
        if (answered.count(placed.node)) continue;
        if (!c.admin() && placed.tenant != c.tenant) continue;
        nlohmann::json j{{"id", placed.id}, {"state", "unavailable"}, {"node", placed.node}};
        if (c.admin()) j["tenant"] = placed.tenant;
        list.push_back(std::move(j));
    }
}

}  // namespace airlock::api

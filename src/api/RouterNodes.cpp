// GET /v1/nodes: the fleet's nodes, up or down, with what each has room for.
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "api/ErrorMapping.hpp"
#include "api/RequestParsing.hpp"
#include "api/Router.hpp"
#include "api/SandboxMover.hpp"
#include "core/Clock.hpp"
#include "core/Log.hpp"
#include "fleet/Fleet.hpp"
#include "fleet/HttpExchange.hpp"
#include "fleet/NodeMembership.hpp"

namespace airlock::api {

namespace {
// Whether another node's API takes a connection now (its lease may outlive
// the process by a few seconds).
bool answers(fleet::Fleet& fleet, const std::string& url) {
    auto peer = fleet.peerAt(url);
    if (!peer) return true;
    auto a =
        fleet::httpExchange(*peer, "GET", "/healthz", {}, {},
                            std::chrono::steady_clock::now() + std::chrono::seconds(1), 1 << 16);
    return a.outcome == fleet::HttpOutcome::answered;
}

nlohmann::json nodeJson(const fleet::NodeStatus& s, bool self, bool reachable = true) {
    const auto& c = s.record.capacity;
    // A draining node is still up; its health says so, and "draining" too.
    std::string health = !s.up        ? "down"
                         : !reachable ? "unreachable"
                         : s.draining ? "draining"
                                      : "healthy";
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
    for (const auto& s : membership_->nodes()) {
        bool self = s.record.name == membership_->name();
        nodes.push_back(nodeJson(s, self, self || !s.up || answers(*fleet_, s.record.url)));
    }
    return jsonResponse(200, {{"cluster", true}, {"self", membership_->name()}, {"nodes", nodes}});
}

// POST /v1/nodes/{name}/drain {"move": false}: no new sandbox is placed on it.
ApiResponse Router::drainNode(Context& c) {
    if (!membership_)
        throw Error(ErrorCode::not_found, "this host is in no fleet: no node to drain");
    bool move = false;
    if (!c.request.body.empty()) {
        auto j = nlohmann::json::parse(c.request.body, nullptr, false);
        if (!j.is_object()) throw Error(ErrorCode::bad_request, "drain request: not a JSON object");
        for (const auto& [k, v] : j.items()) {
            if (k != "move")
                throw Error(ErrorCode::bad_request, "drain request: unknown field '" + k + "'");
            if (!v.is_boolean())
                throw Error(ErrorCode::bad_request, "drain request: 'move' is a boolean");
            move = v.get<bool>();
        }
    }
    if (!move) return setDraining(c, true);
    // The drained node moves its own sandboxes: asked of it from here.
    if (c.params[0] != membership_->name()) return drainElsewhere(c);
    if (!mover_)
        throw Error(ErrorCode::unavailable, "this node cannot move sandboxes to other nodes");
    auto answer = setDraining(c, true);
    auto j = nlohmann::json::parse(answer.body);
    j["moving"] = mover_->start();
    return jsonResponse(202, j);
}

ApiResponse Router::drainElsewhere(Context& c) {
    const std::string& name = c.params[0];
    if (!c.principal.forwardedBy.empty())
        throw Error(ErrorCode::conflict, "node " + name + " is not this node (" +
                                             membership_->name() + "); asked by a node");
    bool known = false;
    for (const auto& s : membership_->nodes()) known = known || s.record.name == name;
    if (!known) throw Error(ErrorCode::not_found, "no node " + name + " in the fleet");
    auto peer = fleet_ ? fleet_->peer(name) : std::nullopt;
    if (!peer)
        throw Error(ErrorCode::node_unavailable,
                    "node " + name + " is unavailable: it cannot move its sandboxes now");
    std::string target = "/v1/nodes/" + name + "/drain";
    auto headers = fleet_->credential().sign(fleet_->self(), name, "POST", target,
                                             carriedCaller(c.principal), nowUnixSeconds());
    auto answer =
        fleet::httpExchange(*peer, "POST", target, headers, c.request.body,
                            std::chrono::steady_clock::now() + std::chrono::seconds(30), 1 << 20);
    if (answer.outcome != fleet::HttpOutcome::answered)
        throw Error(ErrorCode::node_unavailable, "node " + name + " did not answer: " + answer.why);
    return ApiResponse{answer.status, "application/json", answer.body};
}

// DELETE /v1/nodes/{name}/drain: the node takes new sandboxes again.
ApiResponse Router::undrainNode(Context& c) {
    if (!membership_)
        throw Error(ErrorCode::not_found, "this host is in no fleet: no node to drain");
    return setDraining(c, false);
}

ApiResponse Router::setDraining(Context& c, bool draining) {
    const std::string& name = c.params[0];
    for (auto s : membership_->nodes()) {
        if (s.record.name != name) continue;
        membership_->setDraining(name, draining);
        s.draining = s.record.draining = draining;
        return jsonResponse(200, nodeJson(s, name == membership_->name()));
    }
    throw Error(ErrorCode::not_found, "no node " + name + " in the fleet");
}

fleet::ForwardedCaller Router::carriedCaller(const Principal& p) {
    return fleet::ForwardedCaller{p.keyId, p.keyName, p.tenant, std::string(roleName(p.role))};
}

nlohmann::json Router::withNode(nlohmann::json sandbox) const {
    if (fleet_) sandbox["node"] = fleet_->self();
    return sandbox;
}

void Router::addFleetSandboxes(Context& c, nlohmann::json& list) {
    try {
        addOtherNodesSandboxes(c, list);
    } catch (const Error& e) {
        // Without etcd this node still lists its own.
        logWarn("fleet",
                std::string("a fleet-wide list has only this node's sandboxes: ") + e.what());
    }
}

std::map<std::string, nlohmann::json> Router::askOtherNodes(Context& c, const std::string& target,
                                                            const char* key) {
    // Each other node lists its own, for this caller (signed in, so the
    // node answers as it would the caller; a signed call does not fan
    // out), all asked at once.
    auto caller = carriedCaller(c.principal);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    std::map<std::string, std::future<fleet::HttpAnswer>> asked;
    for (const auto& node : fleet_->nodes()) {
        if (node.name == fleet_->self() || !node.up) continue;
        auto peer = fleet_->peer(node.name);
        if (!peer) continue;
        auto headers =
            fleet_->credential().sign(fleet_->self(), node.name, "GET", target, caller,
                                      nowUnixSeconds());
        asked[node.name] =
            std::async(std::launch::async, [peer = *peer, headers, target, deadline] {
                return fleet::httpExchange(peer, "GET", target, headers, {}, deadline);
            });
    }
    std::map<std::string, nlohmann::json> answers;
    for (auto& [name, pending] : asked) {
        auto answer = pending.get();
        auto body = nlohmann::json::parse(answer.body, nullptr, false);
        if (answer.outcome != fleet::HttpOutcome::answered || answer.status != 200 ||
            !body.is_object() || !body.contains(key) || !body[key].is_array()) {
            logWarn("fleet", "listing node " + name + "'s " + key + ": " +
                                 (answer.why.empty() ? "status " + std::to_string(answer.status)
                                                     : answer.why));
            continue;
        }
        for (auto& item : body[key])
            if (item.is_object() && !item.contains("node")) item["node"] = name;
        answers[name] = std::move(body[key]);
    }
    return answers;
}

void Router::addFleetList(Context& c, const std::string& target, const char* key,
                          nlohmann::json& list) {
    try {
        for (auto& [node, items] : askOtherNodes(c, target, key))
            for (auto& item : items) list.push_back(std::move(item));
    } catch (const Error& e) {
        logWarn("fleet",
                std::string("a fleet-wide list has only this node's ") + key + ": " + e.what());
    }
}

void Router::addOtherNodesSandboxes(Context& c, nlohmann::json& list) {
    std::set<std::string> answered{fleet_->self()};
    for (auto& [node, items] : askOtherNodes(c, "/v1/sandboxes", "sandboxes")) {
        answered.insert(node);
        for (auto& s : items) list.push_back(std::move(s));
    }
    // Every node answered: nothing to read from the records (a full read
    // of them is seconds at a hundred thousand sandboxes).
    auto nodes = fleet_->nodes();
    bool allAnswered = true;
    for (const auto& node : nodes) allAnswered = allAnswered && answered.count(node.name);
    if (allAnswered) return;
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

std::string Router::recordPlacement(const SandboxRecord& r, std::string why) {
    // Display text from the node that placed it (the header comes with a
    // signed call only); bounded, one line.
    if (why.empty()) why = "created where it was asked for";
    if (why.size() > 300) why.resize(300);
    for (auto& ch : why)
        if (static_cast<unsigned char>(ch) < 0x20) ch = ' ';
    fleet_->directory().record(
        fleet::SandboxPlacement{r.id, r.tenant, fleet_->self(), fleet_->membership().epoch(), why});
    return why;
}

ApiResponse Router::placeCreate(Context& c, const CreateSandboxRequest& request,
                                const std::function<ApiResponse(const std::string&)>& createHere) {
    fleet::PlacementRequest wanted;
    wanted.templateName = request.templateName;
    wanted.snapshot = request.snapshot;
    wanted.vcpus = 1;
    wanted.memoryMib = 256;
    if (auto t = services_.host.templates().find(request.templateName)) {
        wanted.vcpus = t->vcpus;
        wanted.memoryMib = t->memoryMib;
    }
    if (request.vcpus) wanted.vcpus = *request.vcpus;
    if (request.memoryMib) wanted.memoryMib = *request.memoryMib;
    auto ranked = fleet_->placement().rank(fleet_->membership().nodes(), wanted);
    if (ranked.empty())
        throw Error(ErrorCode::unavailable,
                    "no node of the fleet can take this sandbox now (its " +
                        std::string(request.snapshot.empty() ? "template" : "snapshot") +
                        ", its memory, or every node draining or down)");
    auto caller = carriedCaller(c.principal);
    std::string refusals;
    // Three nodes at most, as E2B's placement: a node that cannot be
    // reached, or says it has no room, passes the create to the next.
    for (std::size_t i = 0; i < ranked.size() && i < 3; ++i) {
        const auto& choice = ranked[i];
        std::string why = "placed by " + fleet_->self() + ": " + choice.why +
                          (refusals.empty() ? "" : "; after " + refusals);
        if (choice.node == fleet_->self()) {
            fleet_->placement().sent(choice.node, wanted.vcpus);
            return createHere(why);
        }
        auto peer = fleet_->peer(choice.node);
        if (!peer) {
            refusals += (refusals.empty() ? "" : ", ") + choice.node + " unreachable";
            continue;
        }
        // The same door's create on that node (native or E2B), as this caller.
        const std::string& target = c.request.path;
        auto headers =
            fleet_->credential().sign(fleet_->self(), choice.node, "POST", target, caller,
                                      nowUnixSeconds());
        headers["x-airlock-placement"] = why;
        fleet_->placement().sent(choice.node, wanted.vcpus);
        auto answer = fleet::httpExchange(
            *peer, "POST", target, headers, c.request.body,
            std::chrono::steady_clock::now() + std::chrono::minutes(10), 1 << 20);
        if (answer.outcome == fleet::HttpOutcome::unreachable) {
            refusals += (refusals.empty() ? "" : ", ") + choice.node + " unreachable";
            continue;
        }
        if (answer.outcome == fleet::HttpOutcome::no_answer)
            throw Error(ErrorCode::unavailable, "node " + choice.node +
                                                    " did not answer the create (" + answer.why +
                                                    "); list the sandboxes before trying again");
        // No room there (its disk, its agent transport): the next node.
        if ((answer.status == 503 || answer.status == 507) && i + 1 < ranked.size()) {
            refusals += (refusals.empty() ? "" : ", ") + choice.node + " answered " +
                        std::to_string(answer.status);
            continue;
        }
        return ApiResponse{answer.status, "application/json", answer.body};
    }
    throw Error(ErrorCode::unavailable, "no node of the fleet took the sandbox: " + refusals);
}

}  // namespace airlock::api

// The evidence routes: seal and list a sandbox's bundles, download one,
// the public keys that verify them, and a human's review decision (an
// approver's: the agent never reviews its own work). Parsing here, the work
// in EvidenceService.
#include <algorithm>
#include <future>

#include "api/ErrorMapping.hpp"
#include "api/EvidenceParsing.hpp"
#include "api/Router.hpp"

#include "core/Clock.hpp"
#include "core/Log.hpp"
#include "fleet/Fleet.hpp"
#include "fleet/HttpExchange.hpp"
#include "core/Error.hpp"
#include "core/JsonFields.hpp"
#include "evidence/EvidenceService.hpp"

namespace airlock::api {
using nlohmann::json;

EvidenceService& Router::evidence() {
    if (!evidence_)
        throw Error(ErrorCode::unavailable, "evidence bundles are not enabled on this server");
    return *evidence_;
}

// GET /v1/evidence/keys
ApiResponse Router::listEvidenceKeys(Context& c) {
    auto j = evidenceKeysJson(evidence().keys());
    // Each node signs its own bundles: a fleet lists every live node's keys.
    if (fleet_) {
        for (auto& k : j["keys"]) k["node"] = fleet_->self();
        if (c.principal.forwardedBy.empty()) addFleetList(c, "/v1/evidence/keys", "keys", j["keys"]);
    }
    return jsonResponse(200, j);
}

// POST /v1/sandboxes/{}/evidence
ApiResponse Router::sealEvidence(Context& c) {
    json body = c.request.body.find_first_not_of(" \t\r\n") == std::string::npos
                    ? json::object()
                    : parseJsonBody(c.request.body);
    rejectUnknownFields(body, {}, "evidence request");
    auto r = evidence().seal(c.tenant, c.params[0], "manual");
    return jsonResponse(201, evidenceRecordJson(r));
}

namespace {
json sortedByCreation(json list) {
    std::stable_sort(list.begin(), list.end(), [](const json& a, const json& b) {
        return a.value("created_at", "") < b.value("created_at", "");
    });
    return list;
}
}  // namespace

// GET /v1/sandboxes/{}/evidence
ApiResponse Router::listSandboxEvidence(Context& c) {
    json list = json::array();
    std::set<std::string> here;
    for (const auto& r : evidence().list(c.tenant, c.params[0])) {
        here.insert(r.id);
        list.push_back(evidenceRecordJson(r));
    }
    if (!fleet_) return jsonResponse(200, {{"evidence", list}});
    // A sandbox that moved keeps its bundles where they were sealed.
    for (auto& item : list) item["node"] = fleet_->self();
    json unavailable = json::array();
    addEvidenceSealedElsewhere(c, c.params[0], here, list, unavailable);
    json answer{{"evidence", sortedByCreation(std::move(list))}};
    if (!unavailable.empty()) answer["unavailable"] = std::move(unavailable);
    return jsonResponse(200, answer);
}

void Router::addEvidenceSealedElsewhere(Context& c, const std::string& sandboxId,
                                        const std::set<std::string>& here, json& list,
                                        json& unavailable) {
    // A bundle stays on the node that sealed it: each is asked for its own
    // (as the caller, so it answers as it would them), all at once.
    constexpr std::size_t kMaxAsked = 200;
    std::vector<std::pair<std::string, fleet::ObjectDirectory::Entry>> sealed;
    try {
        sealed = fleet_->evidence().ofSandbox(sandboxId);
    } catch (const Error& e) {
        logWarn("fleet", "the bundles of " + sandboxId + " sealed on other nodes are not listed: " +
                             e.what());
        return;
    }
    auto caller = carriedCaller(c.principal);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    struct Asked {
        std::string id, node;
        std::future<fleet::HttpAnswer> answer;
    };
    std::vector<Asked> asked;
    for (const auto& [id, entry] : sealed) {
        if (here.count(id) || entry.node == fleet_->self() || asked.size() >= kMaxAsked) continue;
        if (!c.admin() && entry.tenant != c.tenant) continue;
        auto peer = fleet_->peer(entry.node);
        if (!peer) {
            unavailable.push_back({{"id", id}, {"node", entry.node}});
            continue;
        }
        std::string target = "/v1/evidence/" + id + "/info";
        auto headers = fleet_->credential().sign(fleet_->self(), entry.node, "GET", target, caller,
                                                 nowUnixSeconds());
        asked.push_back({id, entry.node,
                         std::async(std::launch::async, [peer = *peer, headers, target, deadline] {
                             return fleet::httpExchange(peer, "GET", target, headers, {}, deadline);
                         })});
    }
    for (auto& [id, node, pending] : asked) {
        auto answer = pending.get();
        auto body = json::parse(answer.body, nullptr, false);
        if (answer.outcome != fleet::HttpOutcome::answered || answer.status != 200 ||
            !body.is_object() || body.value("sandbox_id", "") != sandboxId) {
            unavailable.push_back({{"id", id}, {"node", node}});
            logWarn("fleet", "a bundle of " + sandboxId + " on node " + node + " is not listed: " +
                                 (answer.why.empty() ? "status " + std::to_string(answer.status)
                                                     : answer.why));
            continue;
        }
        body["node"] = node;
        list.push_back(std::move(body));
    }
}

// GET /v1/evidence/{}
ApiResponse Router::getEvidence(Context& c) {
    auto r = evidence().get(c.tenant, c.params[0]);
    return ApiResponse{200, "application/gzip", evidence().bundleBytes(r)};
}

// GET /v1/evidence/{}/info
ApiResponse Router::getEvidenceInfo(Context& c) {
    return jsonResponse(200, evidenceRecordJson(evidence().get(c.tenant, c.params[0])));
}

// POST /v1/evidence/{}/review
ApiResponse Router::reviewEvidence(Context& c) {
    auto review = parseReviewRequest(c.request.body);
    std::string reviewer = "key:" + c.principal.keyId + " (" + c.principal.keyName + ", " +
                           roleName(c.principal.role) + ")";
    return jsonResponse(201, evidenceReviewJson(evidence().review(c.tenant, c.params[0], review.decision,
                                                                 review.reason, reviewer)));
}

// GET /v1/evidence/{}/review
ApiResponse Router::getEvidenceReview(Context& c) {
    return jsonResponse(200, evidenceReviewJson(evidence().reviewOf(c.tenant, c.params[0])));
}

}  // namespace airlock::api

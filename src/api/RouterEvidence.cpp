// The evidence routes: seal and list a sandbox's bundles, download one,
// the public keys that verify them, and a human's review decision (an
// approver's: the agent never reviews its own work). Parsing here, the work
// in EvidenceService.
#include "api/ErrorMapping.hpp"
#include "api/EvidenceParsing.hpp"
#include "api/Router.hpp"

#include "fleet/Fleet.hpp"
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

// GET /v1/sandboxes/{}/evidence
ApiResponse Router::listSandboxEvidence(Context& c) {
    json list = json::array();
    for (const auto& r : evidence().list(c.tenant, c.params[0]))
        list.push_back(evidenceRecordJson(r));
    return jsonResponse(200, {{"evidence", list}});
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

#include "api/EvidenceParsing.hpp"

#include "api/RequestParsing.hpp"
#include "core/Clock.hpp"
#include "core/JsonFields.hpp"

namespace airlock::api {
using nlohmann::json;

ReviewRequest parseReviewRequest(const std::string& body) {
    json j = parseJsonBody(body);
    rejectUnknownFields(j, {"decision", "reason"}, "review");
    ReviewRequest r;
    r.decision = parseReviewDecision(stringField(j, "decision"));
    r.reason = j.contains("reason") ? stringField(j, "reason") : "";
    if (r.reason.size() > 4000)
        throw Error(ErrorCode::bad_request, "'reason' is longer than 4000 bytes");
    return r;
}

json evidenceRecordJson(const EvidenceRecord& r) {
    json summary = json::parse(r.summaryJson, nullptr, false);
    if (summary.is_discarded()) summary = json::object();
    json review = r.reviewJson.empty() ? json(nullptr) : json::parse(r.reviewJson, nullptr, false);
    if (review.is_discarded()) review = nullptr;
    return {{"id", r.id},
            {"sandbox_id", r.sandboxId},
            {"kind", r.kind},
            {"created_at", r.createdAt},
            {"sha256", r.sha256},
            {"size", r.size},
            {"summary", summary},
            {"expires_at", r.expiresAt ? json(formatUnixSeconds(r.expiresAt)) : json(nullptr)},
            {"review", review}};
}

json evidenceKeysJson(const std::vector<EvidenceKey::PublicKey>& keys) {
    json list = json::array();
    for (const auto& k : keys) {
        json e = {{"keyid", k.keyid},
                  {"alg", k.alg},
                  {"public_key_pem", k.publicKeyPem},
                  {"created_at", k.createdAt},
                  {"active", k.active}};
        if (!k.retiredAt.empty()) e["retired_at"] = k.retiredAt;
        list.push_back(e);
    }
    return {{"keys", list}};
}

json evidenceReviewJson(const EvidenceReview& review) {
    return {{"decision", reviewDecisionName(review.decision)},
            {"reason", review.reason},
            {"reviewer", review.reviewer},
            {"at", review.at},
            {"attestation", review.attestation}};
}

}  // namespace airlock::api

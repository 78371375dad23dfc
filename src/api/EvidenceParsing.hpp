#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "evidence/EvidenceKey.hpp"
#include "evidence/EvidenceReview.hpp"
#include "store/EvidenceStore.hpp"

namespace airlock::api {

// POST /v1/evidence/{id}/review, strictly: the decision and its reason.
struct ReviewRequest {
    ReviewDecision decision = ReviewDecision::reject;
    std::string reason;
};
ReviewRequest parseReviewRequest(const std::string& body);

// The evidence routes' answers.
nlohmann::json evidenceRecordJson(const EvidenceRecord& r);
nlohmann::json evidenceKeysJson(const std::vector<EvidenceKey::PublicKey>& keys);
nlohmann::json evidenceReviewJson(const EvidenceReview& review);

}  // namespace airlock::api

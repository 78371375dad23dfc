#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/Error.hpp"

namespace airlock {

enum class ReviewDecision { approve, reject };

inline const char* reviewDecisionName(ReviewDecision d) {
    return d == ReviewDecision::approve ? "approve" : "reject";
}
// Error(bad_request) for anything but "approve" or "reject".
inline ReviewDecision parseReviewDecision(const std::string& text) {
    if (text == "approve") return ReviewDecision::approve;
    if (text == "reject") return ReviewDecision::reject;
    throw Error(ErrorCode::bad_request, "'decision' must be \"approve\" or \"reject\"");
}

// A human's decision on an evidence bundle, and the signed in-toto
// statement (a DSSE envelope, a document of its own) that records it.
struct EvidenceReview {
    ReviewDecision decision = ReviewDecision::reject;
    std::string reason, reviewer, at;
    nlohmann::json attestation;
};

}  // namespace airlock

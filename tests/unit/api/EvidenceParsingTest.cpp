#include "api/EvidenceParsing.hpp"

#include <gtest/gtest.h>

#include "support/TestEnv.hpp"

namespace airlock::api {
namespace {
using nlohmann::json;
using test::codeOf;

TEST(EvidenceParsing, AReviewIsADecisionAndAReasonAndNothingElse) {
    auto r = parseReviewRequest(R"({"decision": "approve", "reason": "read it"})");
    EXPECT_EQ(r.decision, ReviewDecision::approve);
    EXPECT_EQ(r.reason, "read it");
    EXPECT_EQ(parseReviewRequest(R"({"decision": "reject"})").decision, ReviewDecision::reject);
    for (const char* bad : {R"({"decision": "maybe"})", R"({"decision": "approve", "by": "me"})",
                            R"({"reason": "no decision"})", R"({"decision": 1})", "not json"})
        EXPECT_EQ(codeOf([&] { parseReviewRequest(bad); }), ErrorCode::bad_request) << bad;
    json long_ = {{"decision", "approve"}, {"reason", std::string(4001, 'x')}};
    EXPECT_EQ(codeOf([&] { parseReviewRequest(long_.dump()); }), ErrorCode::bad_request);
}

TEST(EvidenceParsing, ARecordRendersItsSummaryReviewAndExpiry) {
    EvidenceRecord r;
    r.id = "evd-1";
    r.sandboxId = "sb-1";
    r.kind = "final";
    r.sha256 = std::string(64, 'a');
    r.size = 10;
    r.summaryJson = R"({"tests": "passed"})";
    r.expiresAt = 0;
    json j = evidenceRecordJson(r);
    EXPECT_EQ(j["summary"]["tests"], "passed");
    EXPECT_TRUE(j["expires_at"].is_null()) << "kept while its sandbox lives";
    EXPECT_TRUE(j["review"].is_null());
    r.summaryJson = "{damaged";
    r.reviewJson = R"({"decision": "approve"})";
    r.expiresAt = 86400;
    j = evidenceRecordJson(r);
    EXPECT_EQ(j["summary"], json::object());
    EXPECT_EQ(j["review"]["decision"], "approve");
    EXPECT_EQ(j["expires_at"], "1970-01-02T00:00:00.000Z");
}

TEST(EvidenceParsing, KeysAndReviewsRenderAsTheApiDocumentsThem) {
    EvidenceKey::PublicKey active{"k1", EvidenceKey::kAlg, "PEM1", "2026-01-01T00:00:00Z", "", true};
    EvidenceKey::PublicKey retired{"k0", EvidenceKey::kAlg, "PEM0", "2025-01-01T00:00:00Z",
                                   "2026-01-01T00:00:00Z", false};
    json keys = evidenceKeysJson({active, retired});
    ASSERT_EQ(keys["keys"].size(), 2u);
    EXPECT_FALSE(keys["keys"][0].contains("retired_at"));
    EXPECT_EQ(keys["keys"][1]["retired_at"], "2026-01-01T00:00:00Z");
    EXPECT_EQ(keys["keys"][0]["public_key_pem"], "PEM1");

    EvidenceReview review{ReviewDecision::reject, "tests missing", "key:k (ana, approver)",
                          "2026-12-04T00:00:00Z", json{{"payloadType", "x"}}};
    json j = evidenceReviewJson(review);
    EXPECT_EQ(j["decision"], "reject");
    EXPECT_EQ(j["reason"], "tests missing");
    EXPECT_EQ(j["attestation"]["payloadType"], "x");
}

}  // namespace
}  // namespace airlock::api

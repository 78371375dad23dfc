#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace airlock {

class EvidenceKey;

// DSSE (Dead Simple Signing Envelope) as in-toto attestations use it: the
// signature is over PAE(type, body) = "DSSEv1" SP len(type) SP type SP
// len(body) SP body, so a verifier needs nothing but the envelope, sha256
// and the public key.
namespace dsse {

inline constexpr const char* kInTotoPayloadType = "application/vnd.in-toto+json";

std::string pae(std::string_view payloadType, std::string_view payload);
// {"payload": base64, "payloadType", "signatures": [{"keyid", "sig": base64}]}
nlohmann::json sign(const EvidenceKey& key, std::string_view payloadType,
                    const std::string& payload);
// The payload of an envelope signed by publicKeyPem; throws Error(bad_request)
// when the envelope is malformed or no signature in it verifies.
std::string verify(const nlohmann::json& envelope, const std::string& publicKeyPem);

}  // namespace dsse
}  // namespace airlock

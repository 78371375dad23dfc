#include "evidence/Dsse.hpp"

#include "core/Error.hpp"
#include "core/SecretCipher.hpp"
#include "evidence/EvidenceKey.hpp"

namespace airlock::dsse {

std::string pae(std::string_view payloadType, std::string_view payload) {
    std::string out = "DSSEv1 " + std::to_string(payloadType.size()) + " ";
    out.append(payloadType);
    out += " " + std::to_string(payload.size()) + " ";
    out.append(payload);
    return out;
}

nlohmann::json sign(const EvidenceKey& key, std::string_view payloadType,
                    const std::string& payload) {
    return {
        {"payload", base64Encode(payload)},
        {"payloadType", std::string(payloadType)},
        {"signatures",
         {{{"keyid", key.keyid()}, {"sig", base64Encode(key.sign(pae(payloadType, payload)))}}}}};
}

std::string verify(const nlohmann::json& envelope, const std::string& publicKeyPem) {
    if (!envelope.is_object() || !envelope.contains("payload") ||
        !envelope["payload"].is_string() || !envelope.contains("payloadType") ||
        !envelope["payloadType"].is_string() || !envelope.contains("signatures") ||
        !envelope["signatures"].is_array())
        throw Error(ErrorCode::bad_request, "not a DSSE envelope");
    std::string payload = base64Decode(envelope["payload"].get<std::string>());
    std::string message = pae(envelope["payloadType"].get<std::string>(), payload);
    for (const auto& s : envelope["signatures"]) {
        if (!s.is_object() || !s.contains("sig") || !s["sig"].is_string()) continue;
        std::string sig;
        try {
            sig = base64Decode(s["sig"].get<std::string>());
        } catch (const Error&) {
            continue;
        }
        if (EvidenceKey::verify(publicKeyPem, message, sig)) return payload;
    }
    throw Error(ErrorCode::bad_request, "no signature of the DSSE envelope verifies with the key");
}

}  // namespace airlock::dsse

#include "fleet/NodeCredential.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <nlohmann/json.hpp>

#include "core/Error.hpp"
#include "core/Hex.hpp"
#include "core/Ids.hpp"
#include "core/SecretCipher.hpp"
#include "protocol/JsonText.hpp"

namespace airlock::fleet {

using json = nlohmann::json;

NodeCredential::NodeCredential(std::string token) : token_(std::move(token)) {
    if (token_.size() < 32)
        throw Error(ErrorCode::bad_request, "the cluster token must be at least 32 characters");
}

std::string NodeCredential::mac(const std::string& text) const {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    HMAC(EVP_sha256(), token_.data(), static_cast<int>(token_.size()),
         reinterpret_cast<const unsigned char*>(text.data()), text.size(), out, &len);
    return hexEncode(out, len);
}

std::array<unsigned char, 32> NodeCredential::derivedKey(const std::string& label) const {
    // Other labels than every signed text ("airlock-node-v1\n..."): no
    // signature is ever a key, nor a key a signature.
    std::array<unsigned char, 32> key{};
    unsigned int len = 0;
    HMAC(EVP_sha256(), token_.data(), static_cast<int>(token_.size()),
         reinterpret_cast<const unsigned char*>(label.data()), label.size(), key.data(), &len);
    return key;
}

namespace {
std::string signedText(const std::string& from, const std::string& to, std::int64_t when,
                       const std::string& nonce, const std::string& method,
                       const std::string& target, const std::string& caller) {
    return "airlock-node-v2\n" + from + "\n" + to + "\n" + std::to_string(when) + "\n" + nonce +
           "\n" + method + "\n" + target + "\n" + caller;
}
[[noreturn]] void refuse(const std::string& why) {
    throw Error(ErrorCode::unauthorized, "node-to-node call refused: " + why);
}
constexpr std::int64_t kWindow = 60;
constexpr std::size_t kMaxSeen = 200'000;  // a minute of calls at over 3,000 a second
}  // namespace

std::map<std::string, std::string> NodeCredential::sign(const std::string& fromNode,
                                                        const std::string& toNode,
                                                        const std::string& method,
                                                        const std::string& target,
                                                        const ForwardedCaller& caller,
                                                        std::int64_t unixNow) const {
    std::string callerText = base64Encode(jsonText(json{{"key_id", caller.keyId},
                                                        {"key_name", caller.keyName},
                                                        {"tenant", caller.tenant},
                                                        {"role", caller.role}}));
    std::string nonce = hexEncode(randomBytes(16));
    return {{kFrom, fromNode},
            {kCaller, callerText},
            {kAuth, "v2:" + std::to_string(unixNow) + ":" + nonce + ":" +
                        mac(signedText(fromNode, toNode, unixNow, nonce, method, target,
                                       callerText))}};
}

bool NodeCredential::firstUse(const std::string& nonce, std::int64_t when,
                              std::int64_t unixNow) const {
    std::lock_guard lock(seen_->mutex);
    auto& expiry = seen_->expiry;
    if (expiry.size() >= kMaxSeen / 2)
        std::erase_if(expiry, [&](const auto& e) { return e.second < unixNow; });
    if (expiry.size() >= kMaxSeen) return false;  // refused rather than forgotten
    return expiry.emplace(nonce, when + kWindow + 1).second;
}

ForwardedCaller NodeCredential::verify(const std::map<std::string, std::string>& headers,
                                       const std::string& self, const std::string& method,
                                       const std::string& target, std::int64_t unixNow) const {
    auto get = [&](const char* name) {
        auto it = headers.find(name);
        return it == headers.end() ? std::string() : it->second;
    };
    std::string from = get(kFrom), callerText = get(kCaller), auth = get(kAuth);
    if (from.empty() || callerText.empty() || auth.empty()) refuse("no node credential");
    // v2:<time>:<nonce>:<mac>
    auto second = auth.find(':', 3);
    auto third = second == std::string::npos ? second : auth.find(':', second + 1);
    if (auth.rfind("v2:", 0) != 0 || third == std::string::npos) refuse("a malformed credential");
    std::int64_t when = 0;
    try {
        std::size_t used = 0;
        when = std::stoll(auth.substr(3, second - 3), &used);
        if (used != second - 3) refuse("a malformed credential");
    } catch (const Error&) {
        throw;
    } catch (...) {
        refuse("a malformed credential");
    }
    std::string nonce = auth.substr(second + 1, third - second - 1);
    if (nonce.size() != 32 || !isLowerHex(nonce)) refuse("a malformed credential");
    if (when < unixNow - kWindow || when > unixNow + kWindow) refuse("a stale credential");
    std::string expected = mac(signedText(from, self, when, nonce, method, target, callerText));
    std::string given = auth.substr(third + 1);
    if (given.size() != expected.size() ||
        CRYPTO_memcmp(given.data(), expected.data(), expected.size()) != 0)
        refuse("a wrong credential");
    // Only a call signed right counts against the nonces: forgeries cannot fill it.
    if (!firstUse(nonce, when, unixNow)) refuse("a replayed credential");
    json j;
    try {
        j = json::parse(base64Decode(callerText));
    } catch (...) {
        refuse("a malformed caller");
    }
    if (!j.is_object()) refuse("a malformed caller");
    ForwardedCaller c;
    c.keyId = j.value("key_id", "");
    c.keyName = j.value("key_name", "");
    c.tenant = j.value("tenant", "");
    c.role = j.value("role", "");
    if (c.keyId.empty() || c.tenant.empty() ||
        (c.role != "agent" && c.role != "approver" && c.role != "admin"))
        refuse("a malformed caller");
    return c;
}

}  // namespace airlock::fleet

#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace airlock::fleet {

// The caller a node authenticated, carried to the node it forwards to.
struct ForwardedCaller {
    std::string keyId, keyName, tenant, role;  // role: agent | approver | admin
};

// Node-to-node calls carry the caller the first node authenticated, signed
// with the fleet's shared token (--cluster-token-file): HMAC-SHA256 over the
// sending node, the node it is for, the time, a random nonce, the method,
// the target and the caller. The receiving node takes the caller from these
// headers only when the MAC is right, the call names it, the time is within
// a minute of its own and the nonce is new to it (a captured call cannot be
// replayed, here or on another node); no key crosses the wire. Bodies are
// not covered: node-to-node traffic goes over TLS (docs/deploy.md).
class NodeCredential {
  public:
    static constexpr const char* kFrom = "x-airlock-forwarded-by";
    static constexpr const char* kCaller = "x-airlock-caller";
    static constexpr const char* kAuth = "x-airlock-node-auth";

    explicit NodeCredential(std::string token);
    // The three headers for a forwarded request.
    std::map<std::string, std::string> sign(const std::string& fromNode, const std::string& toNode,
                                            const std::string& method, const std::string& target,
                                            const ForwardedCaller& caller,
                                            std::int64_t unixNow) const;
    // The caller of a request forwarded to `self`; throws Error(unauthorized)
    // for a missing, forged, altered, stale, replayed or misaddressed one.
    ForwardedCaller verify(const std::map<std::string, std::string>& headers,
                           const std::string& self, const std::string& method,
                           const std::string& target, std::int64_t unixNow) const;

    // The key a moving sandbox's secrets are sealed with on their way
    // between two nodes (derived from the token: any node opens them, no
    // node's own key leaves it).
    std::array<unsigned char, 32> journeyKey() const { return derivedKey("airlock-journey-v1"); }
    // The key tenants' brokered credentials are sealed with in a fleet's
    // etcd: every node opens what any node sealed.
    std::array<unsigned char, 32> credentialsKey() const {
        return derivedKey("airlock-credentials-v1");
    }

  private:
    std::array<unsigned char, 32> derivedKey(const std::string& label) const;
    std::string mac(const std::string& text) const;
    // Nonces seen within the time window, and when each expires.
    bool firstUse(const std::string& nonce, std::int64_t when, std::int64_t unixNow) const;
    std::string token_;
    struct SeenNonces {
        std::mutex mutex;
        std::map<std::string, std::int64_t> expiry;
    };
    std::shared_ptr<SeenNonces> seen_ = std::make_shared<SeenNonces>();  // shared by copies
};

}  // namespace airlock::fleet

#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace airlock::fleet {

// The caller a node authenticated, carried to the node it forwards to.
struct ForwardedCaller {
    std::string keyId, keyName, tenant, role;  // role: agent | approver | admin
};

// Node-to-node calls carry the caller the first node authenticated, signed
// with the fleet's shared token (--cluster-token-file): HMAC-SHA256 over the
// sending node, the time, the method, the target and the caller. The
// receiving node takes the caller from these headers only when the MAC is
// right and the time within a minute of its own; no key crosses the wire.
class NodeCredential {
  public:
    static constexpr const char* kFrom = "x-airlock-forwarded-by";
    static constexpr const char* kCaller = "x-airlock-caller";
    static constexpr const char* kAuth = "x-airlock-node-auth";

    explicit NodeCredential(std::string token);
    // The three headers for a forwarded request.
    std::map<std::string, std::string> sign(const std::string& fromNode, const std::string& method,
                                            const std::string& target,
                                            const ForwardedCaller& caller,
                                            std::int64_t unixNow) const;
    // The caller of a forwarded request; throws Error(unauthorized) for a
    // missing, forged, altered or stale signature.
    ForwardedCaller verify(const std::map<std::string, std::string>& headers,
                           const std::string& method, const std::string& target,
                           std::int64_t unixNow) const;

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
    std::string token_;
};

}  // namespace airlock::fleet

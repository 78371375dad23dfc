#pragma once
#include <optional>
#include <string>

#include "store/ApiKeys.hpp"

namespace airlock::api {

// Who is calling: the key's id and name (what audit records name), its
// tenant and its role.
struct Principal {
    std::string keyId, keyName, tenant;
    Role role = Role::agent;
    std::string forwardedBy;  // the fleet node that authenticated it ("": this one)
};

// How the audit names a caller: "key:<id> (<name>, <role>)".
std::string callerName(const Principal& who);

// Resolves "Authorization: Bearer KEY" to a principal; throws
// Error(unauthorized) for a missing, unknown, revoked or expired key. Every
// call reads the store: a revoked key stops working at once.
class Authenticator {
  public:
    explicit Authenticator(ApiKeys& keys) : keys_(keys) {}
    Principal principalFor(const std::string& authorizationHeader);
    // The E2B front door's "X-API-KEY": an Airlock key as is, or with "e2b_"
    // in place of "ak_" (E2B's SDKs refuse keys of another shape); the same
    // key, so the same tenant and role.
    Principal principalForE2bKey(const std::string& xApiKey);
    // The key with this id while it lives (not revoked, not expired): what a
    // credential minted for that key (an E2B access token) is checked against
    // on every use.
    std::optional<Principal> activeKey(const std::string& keyId);
    // The active keys that drive a tenant's sandboxes: its own agent and
    // admin keys, and every tenant's admin keys (approvers drive nothing).
    std::vector<Principal> driversOf(const std::string& tenant);

  private:
    Principal principalForKey(const std::string& key);
    ApiKeys& keys_;
};

}  // namespace airlock::api

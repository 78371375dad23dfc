#pragma once
#include <string>

#include "store/ApiKeyStore.hpp"

namespace airlock::api {

// Who is calling: the key's id and name (what audit records name), its
// tenant and its role.
struct Principal {
    std::string keyId, keyName, tenant;
    Role role = Role::agent;
};

// Resolves "Authorization: Bearer KEY" to a principal; throws
// Error(unauthorized) for a missing, unknown, revoked or expired key. Every
// call reads the store: a revoked key stops working at once.
class Authenticator {
  public:
    explicit Authenticator(ApiKeyStore& keys) : keys_(keys) {}
    Principal principalFor(const std::string& authorizationHeader);

  private:
    ApiKeyStore& keys_;
};

}  // namespace airlock::api

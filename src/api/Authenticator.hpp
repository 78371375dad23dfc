#pragma once
#include <string>

#include "store/ApiKeyStore.hpp"

namespace airlock::api {

// Resolves "Authorization: Bearer KEY" to a tenant; throws Error(unauthorized).
class Authenticator {
public:
    explicit Authenticator(ApiKeyStore& keys) : keys_(keys) {}
    std::string tenantFor(const std::string& authorizationHeader);

private:
    ApiKeyStore& keys_;
};

}  // namespace airlock::api

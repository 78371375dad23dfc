#pragma once
#include <memory>
#include <string>

#include "api/Authenticator.hpp"
#include "api/HttpTypes.hpp"
#include "api/TenantLimiter.hpp"
#include "controller/SandboxController.hpp"
#include "e2b/E2bWire.hpp"

namespace airlock::api {

// The E2B-compatible control plane (/sandboxes, /v2/sandboxes...): E2B's
// request and response shapes translated to and from the same controller
// calls the native API makes, so policy, quotas, roles and audit apply
// unchanged. Authenticated by X-API-KEY (an Airlock key, or the same key
// with e2b_ in place of ak_). Errors are {"code": status, "message"}: the
// SDK reads the code from the body.
class E2bApi {
  public:
    E2bApi(SandboxController& controller, Authenticator& auth, TenantLimiter& limiter,
           const e2b::SandboxTokens& tokens, std::string publicDomain);

    // Whether a path is one of the control plane's.
    static bool owns(const std::string& path);
    // Never throws; may block (a create boots a VM).
    ApiResponse handle(const ApiRequest& request);

  private:
    ApiResponse dispatch(const ApiRequest& request);
    ApiResponse create(const std::string& tenant, const std::string& keyId,
                       const ApiRequest& request);
    ApiResponse list(const Principal& who, const ApiRequest& request);
    ApiResponse connect(const std::string& tenant, const std::string& keyId, const std::string& id,
                        const ApiRequest& request, bool resumeRoute);
    // The access tokens in it are bound to the calling key (keyId).
    nlohmann::json sandboxAnswer(const SandboxRecord& r, const std::string& asked,
                                 const std::string& keyId) const;
    nlohmann::json listedSandbox(const SandboxRecord& r) const;

    SandboxController& controller_;
    Authenticator& auth_;
    TenantLimiter& limiter_;
    const e2b::SandboxTokens& tokens_;
    std::string publicDomain_;
};

// {"code": status, "message": ...} with that status.
ApiResponse e2bError(int status, const std::string& message);
// The same for any exception (typed errors by their mapped status).
ApiResponse e2bErrorFor(std::exception_ptr error, const ApiRequest& request);

}  // namespace airlock::api

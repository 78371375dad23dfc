#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

namespace airlock {

// Every failure the core reports has one of these codes; the API layer maps
// them to HTTP status in exactly one place (api/ErrorMapping).
enum class ErrorCode {
    bad_request,
    unauthorized,
    forbidden,
    policy_denied,  // the command policy refused a command (403)
    not_found,
    conflict,
    unprocessable,  // well-formed but cannot be carried out: an unreachable repository, an unknown ref (422)
    payload_too_large,
    agent_timeout,
    agent_error,
    hypervisor_error,
    unavailable,
    too_many_requests,     // a tenant's concurrency limit (429)
    quota_exceeded,        // a tenant's quota (429), named in the message
    insufficient_storage,  // the data dir's filesystem is low on space (507)
    method_not_allowed,    // the path is routed, not with this method (405)
    already_exists,        // what a create names is there already (409; E2B's MakeDir)
    sandbox_unreachable,   // a gateway request's sandbox is gone or paused (502, as E2B's proxy)
    node_unavailable,      // the fleet node holding what a call names is down (503, Retry-After)
    internal,
};

std::string_view errorCodeName(ErrorCode code);

class Error : public std::runtime_error {
  public:
    Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
    ErrorCode code() const { return code_; }

  private:
    ErrorCode code_;
};

}  // namespace airlock

#include "core/Error.hpp"

namespace airlock {

std::string_view errorCodeName(ErrorCode code) {
    switch (code) {
        case ErrorCode::bad_request:
            return "bad_request";
        case ErrorCode::unauthorized:
            return "unauthorized";
        case ErrorCode::forbidden:
            return "forbidden";
        case ErrorCode::policy_denied:
            return "policy_denied";
        case ErrorCode::not_found:
            return "not_found";
        case ErrorCode::conflict:
            return "conflict";
        case ErrorCode::unprocessable:
            return "unprocessable";
        case ErrorCode::payload_too_large:
            return "payload_too_large";
        case ErrorCode::agent_timeout:
            return "agent_timeout";
        case ErrorCode::agent_error:
            return "agent_error";
        case ErrorCode::hypervisor_error:
            return "hypervisor_error";
        case ErrorCode::unavailable:
            return "unavailable";
        case ErrorCode::too_many_requests:
            return "too_many_requests";
        case ErrorCode::quota_exceeded:
            return "quota_exceeded";
        case ErrorCode::insufficient_storage:
            return "insufficient_storage";
        case ErrorCode::method_not_allowed:
            return "method_not_allowed";
        case ErrorCode::already_exists:
            return "already_exists";
        case ErrorCode::sandbox_unreachable:
            return "sandbox_unreachable";
        case ErrorCode::node_unavailable:
            return "node_unavailable";
        case ErrorCode::internal:
            return "internal";
    }
    return "internal";
}

}  // namespace airlock

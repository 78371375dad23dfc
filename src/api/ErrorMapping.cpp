#include "api/ErrorMapping.hpp"

#include <nlohmann/json.hpp>

#include "protocol/JsonText.hpp"

namespace airlock::api {

int httpStatusFor(ErrorCode code) {
    switch (code) {
        case ErrorCode::bad_request:
            return 400;
        case ErrorCode::unauthorized:
            return 401;
        case ErrorCode::forbidden:
            return 403;
        case ErrorCode::policy_denied:
            return 403;
        case ErrorCode::not_found:
            return 404;
        case ErrorCode::conflict:
            return 409;
        case ErrorCode::unprocessable:
            return 422;
        case ErrorCode::payload_too_large:
            return 413;
        case ErrorCode::agent_timeout:
            return 504;
        case ErrorCode::agent_error:
            return 502;
        case ErrorCode::hypervisor_error:
            return 500;
        case ErrorCode::unavailable:
            return 503;
        case ErrorCode::too_many_requests:
        case ErrorCode::quota_exceeded:
            return 429;
        case ErrorCode::insufficient_storage:
            return 507;
        case ErrorCode::internal:
            return 500;
    }
    return 500;
}

ApiResponse errorResponse(int status, const std::string& code, const std::string& message) {
    nlohmann::json j{{"error", {{"code", code}, {"message", message}}}};
    return ApiResponse{status, "application/json", jsonText(j) + "\n"};
}

ApiResponse jsonResponse(int status, const nlohmann::json& j) {
    return ApiResponse{status, "application/json", jsonText(j) + "\n"};
}

ApiResponse errorResponse(ErrorCode code, const std::string& message) {
    return errorResponse(httpStatusFor(code), std::string(errorCodeName(code)), message);
}

ApiResponse responseForError(std::exception_ptr error) {
    try {
        std::rethrow_exception(error);
    } catch (const Error& e) {
        return errorResponse(e.code(), e.what());
    } catch (...) {
        return errorResponse(ErrorCode::internal, "internal error");
    }
}

}  // namespace airlock::api

#include "api/ErrorMapping.hpp"

#include <nlohmann/json.hpp>

#include "core/Log.hpp"
#include "e2b/E2bWire.hpp"
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
        case ErrorCode::node_unavailable:
            return 503;
        case ErrorCode::too_many_requests:
        case ErrorCode::quota_exceeded:
            return 429;
        case ErrorCode::insufficient_storage:
            return 507;
        case ErrorCode::method_not_allowed:
            return 405;
        case ErrorCode::already_exists:
            return 409;
        case ErrorCode::sandbox_unreachable:
            return 502;
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
    auto r = errorResponse(httpStatusFor(code), std::string(errorCodeName(code)), message);
    if (code == ErrorCode::node_unavailable) r.headers["Retry-After"] = "5";
    return r;
}

ErrorStatus errorStatus(ErrorCode code, std::string message) {
    return ErrorStatus{code, httpStatusFor(code), std::move(message)};
}

ErrorStatus errorStatusFor(std::exception_ptr error, const ApiRequest& request) {
    try {
        std::rethrow_exception(error);
    } catch (const Error& e) {
        auto out = errorStatus(e.code(), e.what());
        if (out.status >= 500 && e.code() != ErrorCode::sandbox_unreachable)
            logWarn("api", request.method + " " + request.path + ": " + e.what());
        return out;
    } catch (const std::exception& e) {
        logError("api", request.method + " " + request.path + ": unexpected " + e.what());
    } catch (...) {
        logError("api", request.method + " " + request.path + ": unexpected exception");
    }
    return errorStatus(ErrorCode::internal, "internal error");
}

ApiResponse renderErrorBody(ErrorShape shape, const ErrorStatus& error, const std::string& sandboxId);

ApiResponse renderError(ErrorShape shape, const ErrorStatus& error, const std::string& sandboxId) {
    ApiResponse r = renderErrorBody(shape, error, sandboxId);
    // A node of the fleet that is down may be back in seconds.
    if (error.code == ErrorCode::node_unavailable) r.headers["Retry-After"] = "5";
    return r;
}

ApiResponse renderErrorBody(ErrorShape shape, const ErrorStatus& error, const std::string& sandboxId) {
    // E2B's proxy answers for a sandbox it cannot reach, in its own shape, on every route.
    if (error.code == ErrorCode::sandbox_unreachable && shape != ErrorShape::native)
        return ApiResponse{
            502, "application/json",
            jsonText({{"sandboxId", sandboxId}, {"message", error.message}, {"code", 502}})};
    switch (shape) {
        case ErrorShape::native:
            return errorResponse(error.status, std::string(errorCodeName(error.code)),
                                 error.message);
        case ErrorShape::e2b:
            return ApiResponse{error.status, "application/json",
                               jsonText({{"code", error.status}, {"message", error.message}})};
        case ErrorShape::connect: {
            std::string code = e2b::connectCodeFor(error.code);
            // A body over the limit keeps HTTP's own status (envd's proxy answers so).
            int status = error.code == ErrorCode::payload_too_large
                             ? 413
                             : e2b::connectHttpStatus(code);
            return ApiResponse{status, "application/json",
                               e2b::connectErrorJson(code, error.message)};
        }
    }
    return errorResponse(error.status, std::string(errorCodeName(error.code)), error.message);
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

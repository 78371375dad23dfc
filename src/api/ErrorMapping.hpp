#pragma once
#include <exception>
#include <nlohmann/json.hpp>
#include <string>

#include "api/HttpTypes.hpp"
#include "api/RouteTable.hpp"
#include "core/Error.hpp"

namespace airlock::api {

// The one place where core error codes become HTTP statuses.
int httpStatusFor(ErrorCode code);
// {"error":{"code":"...","message":"..."}} with the mapped status.
ApiResponse errorResponse(ErrorCode code, const std::string& message);
// The response for any exception: a typed Error by its code, anything else 500.
ApiResponse responseForError(std::exception_ptr error);
ApiResponse errorResponse(int status, const std::string& code, const std::string& message);
// A JSON body with its status; text that is not UTF-8 is replaced, never thrown on.
ApiResponse jsonResponse(int status, const nlohmann::json& j);

// What any failure means to a client, whatever door it came through: a typed
// Error by its code, anything else internal (logged, its text never sent).
// Server faults (5xx) are logged with the request's method and path.
struct ErrorStatus {
    ErrorCode code = ErrorCode::internal;
    int status = 500;
    std::string message;
};
ErrorStatus errorStatusFor(std::exception_ptr error, const ApiRequest& request);
ErrorStatus errorStatus(ErrorCode code, std::string message);
// The one status rendered in a door's shape. sandboxId: the sandbox a
// gateway request named (E2B's 502 body carries it).
ApiResponse renderError(ErrorShape shape, const ErrorStatus& error,
                        const std::string& sandboxId = "");

}  // namespace airlock::api

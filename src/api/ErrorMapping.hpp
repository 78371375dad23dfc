#pragma once
#include <exception>
#include <nlohmann/json.hpp>
#include <string>

#include "api/HttpTypes.hpp"
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

}  // namespace airlock::api

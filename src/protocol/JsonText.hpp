#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace airlock {

// Compact JSON text of a value whose strings may hold any bytes (guest
// output, file names, client text): invalid UTF-8 becomes U+FFFD instead of
// an exception, so no writer of the channel, the API or the store can be
// made to throw by the bytes it carries.
inline std::string jsonText(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace airlock

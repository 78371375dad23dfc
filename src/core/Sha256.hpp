#pragma once
#include <string>
#include <string_view>

namespace airlock {

// Lower-case hex SHA-256 of a byte string.
std::string sha256Hex(std::string_view data);

}  // namespace airlock

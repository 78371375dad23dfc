#pragma once
#include <string>
#include <string_view>

namespace airlock {

// Lower-case hex SHA-256 of a byte string.
std::string sha256Hex(std::string_view data);
// The sha256 of a file's contents, read in chunks.
std::string sha256FileHex(const std::string& path);

}  // namespace airlock

#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace airlock {

// Lower-case hex of a byte string: digests, keys, tokens.
std::string hexEncode(std::string_view bytes);
std::string hexEncode(const unsigned char* bytes, std::size_t size);

// True when `text` is lower-case hex digits only and, when `length` is not
// zero, exactly that long (a sha256 is 64, a git object id 40).
bool isLowerHex(std::string_view text, std::size_t length = 0);

}  // namespace airlock

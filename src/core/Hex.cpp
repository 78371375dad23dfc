#include "core/Hex.hpp"

namespace airlock {

std::string hexEncode(const unsigned char* bytes, std::size_t size) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(size * 2);
    for (std::size_t i = 0; i < size; ++i) {
        out.push_back(digits[bytes[i] >> 4]);
        out.push_back(digits[bytes[i] & 15]);
    }
    return out;
}

std::string hexEncode(std::string_view bytes) {
    return hexEncode(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

bool isLowerHex(std::string_view text, std::size_t length) {
    if (length != 0 && text.size() != length) return false;
    return !text.empty() && text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

}  // namespace airlock

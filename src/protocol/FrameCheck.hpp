#pragma once
#include <cstdint>

namespace airlock::protocol {

inline std::uint32_t readU32(const unsigned char* p) {
    return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
           std::uint32_t(p[3]);
}

// FNV-1a over the first 16 header bytes.
inline std::uint32_t headerCheck(const char* header16) {
    std::uint32_t h = 2166136261u;
    for (int i = 0; i < 16; ++i) {
        h ^= static_cast<unsigned char>(header16[i]);
        h *= 16777619u;
    }
    return h;
}

}  // namespace airlock::protocol

#pragma once
#include <cctype>
#include <string>
#include <string_view>

namespace airlock {

// ASCII lower case (host names, header names), whatever the locale.
inline std::string asciiLower(std::string_view text) {
    std::string out(text);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

}  // namespace airlock

#pragma once
#include <cstdio>
#include <string>
#include <string_view>

namespace airlock {

// A path or query value for a request target: unreserved characters and '/'
// as they are, every other byte %XX.
inline std::string urlEncode(std::string_view s) {
    std::string out;
    for (unsigned char c : s) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
            out.push_back(static_cast<char>(c));
        } else {
            char buf[4];
            std::snprintf(buf, sizeof buf, "%%%02X", c);
            out += buf;
        }
    }
    return out;
}

}  // namespace airlock

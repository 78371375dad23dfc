#include "evidence/BundlePath.hpp"

#include <cstdio>

namespace airlock {
namespace {

bool keptAsIs(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-' || c == '+' || c == ',' || c == '=' || c == '@' ||
           c == '~';
}

void appendEncoded(std::string& out, unsigned char c) {
    char buf[4];
    std::snprintf(buf, sizeof buf, "%%%02X", c);
    out += buf;
}

}  // namespace

std::string bundleSafePath(std::string_view path) {
    std::string out;
    std::size_t start = 0;
    while (start <= path.size()) {
        auto end = path.find('/', start);
        if (end == std::string_view::npos) end = path.size();
        std::string_view part = path.substr(start, end - start);
        start = end + 1;
        if (part.empty()) continue;
        if (!out.empty()) out += '/';
        bool dots = part == "." || part == "..";
        for (unsigned char c : part)
            if (keptAsIs(c) && !dots)
                out.push_back(static_cast<char>(c));
            else
                appendEncoded(out, c);
    }
    return out.empty() ? "%00" : out;
}

bool isListableName(std::string_view name) {
    return !name.empty() && name != "." && name != ".." &&
           name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

}  // namespace airlock

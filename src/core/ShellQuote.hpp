#pragma once
#include <string>
#include <string_view>

namespace airlock {

// `s` as one POSIX shell word: single-quoted, each ' written as '\''.
inline std::string shellQuote(std::string_view s) {
    std::string out = "'";
    for (char c : s) {
        if (c == '\'')
            out += "'\\''";
        else
            out += c;
    }
    return out + "'";
}

}  // namespace airlock

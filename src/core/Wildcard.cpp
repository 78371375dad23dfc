#include "core/Wildcard.hpp"

#include <string>

namespace airlock {

bool wildcardMatch(std::string_view pattern, std::string_view text, bool questionMarkMatchesOne) {
    std::size_t p = 0, t = 0, star = std::string::npos, mark = 0;
    while (t < text.size()) {
        // '*' first: a '*' in the text is matched by it, not taken as a
        // literal that leaves no way back.
        if (p < pattern.size() && pattern[p] == '*') {
            star = p++;
            mark = t;
        } else if (p < pattern.size() &&
                   ((questionMarkMatchesOne && pattern[p] == '?') || pattern[p] == text[t])) {
            ++p;
            ++t;
        } else if (star != std::string::npos) {
            p = star + 1;
            t = ++mark;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*') ++p;
    return p == pattern.size();
}

}  // namespace airlock

#include "protocol/PathGlob.hpp"

namespace airlock::protocol {
namespace {

// Returns 1 on a match, 0 on no match, -1 when no other split can match
// either, -2 when only an enclosing "**" may still match (git's abort
// rules: they keep runs of "*" from going exponential).
int match(const char* p, const char* pEnd, const char* t, const char* tEnd, const char* pStart) {
    for (; p < pEnd; ++p, ++t) {
        if (*p == '*') {
            const char* q = p;
            while (q < pEnd && *q == '*') ++q;
            bool atSegmentStart = (p == pStart || p[-1] == '/');
            if (q - p >= 2 && atSegmentStart && (q == pEnd || *q == '/')) {
                if (q == pEnd) return 1;   // "**" at the end: everything below
                const char* rest = q + 1;  // after "**/": zero or more directories
                for (const char* s = t;; ++s) {
                    if (s == t || s[-1] == '/') {
                        int r = match(rest, pEnd, s, tEnd, pStart);
                        if (r == 1 || r == -1) return r;
                    }
                    if (s == tEnd) return -1;
                }
            }
            // One segment's worth ("**" elsewhere is a "*").
            if (q == pEnd) {
                for (const char* s = t; s < tEnd; ++s)
                    if (*s == '/') return 0;
                return 1;
            }
            for (const char* s = t; s < tEnd; ++s) {
                int r = match(q, pEnd, s, tEnd, pStart);
                if (r != 0) return r;
                if (*s == '/') return -2;  // a later "**" may still place it
            }
            return -1;  // the rest cannot match at the end of the text: no earlier split can
        }
        if (t == tEnd) return -1;
        if (*p == '?') {
            if (*t == '/') return 0;
            continue;
        }
        if (*p == '[') {
            const char* c = p + 1;
            bool negated = c < pEnd && (*c == '!' || *c == '^');
            if (negated) ++c;
            bool matched = false, closed = false;
            const char* first = c;
            for (; c < pEnd; ++c) {
                if (*c == ']' && c != first) {
                    closed = true;
                    break;
                }
                char lo = *c;
                if (lo == '\\' && c + 1 < pEnd) lo = *++c;
                if (c + 2 < pEnd && c[1] == '-' && c[2] != ']') {
                    char hi = c[2];
                    if (*t >= lo && *t <= hi) matched = true;
                    c += 2;
                } else if (*t == lo) {
                    matched = true;
                }
            }
            if (!closed) {  // no closing bracket: a literal "["
                if (*t != '[') return 0;
                continue;
            }
            if (*t == '/' || matched == negated) return 0;
            p = c;
            continue;
        }
        char want = *p;
        if (want == '\\' && p + 1 < pEnd) want = *++p;
        if (*t != want) return 0;
    }
    return t == tEnd ? 1 : 0;
}

}  // namespace

bool wildmatch(std::string_view pattern, std::string_view text) {
    return match(pattern.data(), pattern.data() + pattern.size(), text.data(),
                 text.data() + text.size(), pattern.data()) == 1;
}

}  // namespace airlock::protocol

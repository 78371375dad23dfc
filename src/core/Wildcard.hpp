#pragma once
#include <string_view>

namespace airlock {

// Shell-like matching of a whole text: '*' matches any run of characters
// (also '/'), '?' one character when `questionMarkMatchesOne` (else it is
// literal), everything else itself. Iterative with backtracking to the last
// '*': linear-ish, no exponential blow-up on hostile patterns.
bool wildcardMatch(std::string_view pattern, std::string_view text,
                   bool questionMarkMatchesOne = true);

}  // namespace airlock

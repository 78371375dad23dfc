#pragma once
#include <string_view>

namespace airlock::protocol {

// Git's wildmatch with WM_PATHNAME, for .gitignore rules (guest) and
// workspace write scopes (host) alike: "*", "?" and "[...]" never match
// "/"; "**/" and "/**" span directories.
bool wildmatch(std::string_view pattern, std::string_view text);

}  // namespace airlock::protocol

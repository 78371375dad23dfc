#pragma once
#include <string>
#include <string_view>

namespace airlock {

// Names the guest chose (artifact paths) as the bundle carries them. Any name
// Linux allows must round-trip, and none may fail a seal or escape the
// bundle's root: each '/'-separated part is percent-encoded but for
// [A-Za-z0-9._-+,=@~], a part that is "." or ".." has its dots encoded, so
// the result is a relative tar path with no backslash, newline, quote or
// markup, that `sha256sum -c` reads unescaped. Empty parts are dropped.
std::string bundleSafePath(std::string_view relativePath);

// A name one entry of a guest directory listing may have: not empty, not
// "." or "..", no '/' and no NUL (a listing that sends another is hostile).
bool isListableName(std::string_view name);

}  // namespace airlock

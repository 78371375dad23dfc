#pragma once
#include <optional>
#include <string>

namespace airlock::protocol {

// A client's path as the guest resolves it (the agent does, and the host
// judges a write scope by the same rule): absolute only, "." and ".."
// resolved lexically, no NUL, at most 4096 bytes. nullopt for anything else.
std::optional<std::string> normalizeGuestPath(const std::string& path);

}  // namespace airlock::protocol

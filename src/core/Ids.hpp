#pragma once
#include <string>
#include <string_view>

namespace airlock {

// Unguessable identifiers: PREFIX + 20 characters of base32 from the OS CSPRNG
// (100 bits), e.g. "sbx-k3j...". Clients cannot enumerate each other's ids.
std::string newId(std::string_view prefix);

// True when `id` has the shape newId(prefix) produces; used to reject junk early.
bool isValidId(std::string_view id, std::string_view prefix);

// Secret bearer tokens: 32 random bytes, base32.
std::string newSecretToken();

// Random bytes from getrandom(2).
std::string randomBytes(std::size_t count);

// A random RFC 4122 v4 UUID string.
std::string newUuid();

}  // namespace airlock

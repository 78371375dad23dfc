#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace airlock {

// Wall-clock time as RFC 3339 UTC with milliseconds, e.g. 2026-11-29T10:20:26.123Z.
std::string formatTimestamp(std::chrono::system_clock::time_point tp);
inline std::string nowTimestamp() { return formatTimestamp(std::chrono::system_clock::now()); }

// Unix seconds of an RFC 3339 time ("2026-12-01T10:00:00Z", fractions and
// a "+02:00" offset allowed); nullopt for anything else.
std::optional<std::int64_t> parseTimestamp(const std::string& text);

inline std::int64_t nowUnixSeconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}
inline std::string formatUnixSeconds(std::int64_t seconds) {
    return formatTimestamp(std::chrono::system_clock::time_point(std::chrono::seconds(seconds)));
}

inline std::int64_t steadyMillis() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace airlock

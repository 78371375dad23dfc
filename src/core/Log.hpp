#pragma once
#include <string_view>

namespace airlock {

enum class LogLevel { debug, info, warn, error };

// One line per event on stderr, with a UTC timestamp. Thread-safe.
void logLine(LogLevel level, std::string_view component, std::string_view message);
void setLogLevel(LogLevel level);

inline void logInfo(std::string_view c, std::string_view m) { logLine(LogLevel::info, c, m); }
inline void logWarn(std::string_view c, std::string_view m) { logLine(LogLevel::warn, c, m); }
inline void logError(std::string_view c, std::string_view m) { logLine(LogLevel::error, c, m); }
inline void logDebug(std::string_view c, std::string_view m) { logLine(LogLevel::debug, c, m); }

}  // namespace airlock

#include "core/Log.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace airlock {
namespace {
std::mutex g_logMutex;
std::atomic<LogLevel> g_level{LogLevel::info};

const char* levelName(LogLevel l) {
    switch (l) {
        case LogLevel::debug: return "debug";
        case LogLevel::info: return "info";
        case LogLevel::warn: return "warn";
        case LogLevel::error: return "error";
    }
    return "?";
}
}  // namespace

void setLogLevel(LogLevel level) { g_level = level; }

void logLine(LogLevel level, std::string_view component, std::string_view message) {
    if (level < g_level.load()) return;
    auto now = std::chrono::system_clock::now();
    std::time_t t = std::chrono::system_clock::to_time_t(now);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    std::lock_guard lock(g_logMutex);
    std::fprintf(stderr, "%s.%03dZ %-5s %.*s: %.*s\n", stamp, static_cast<int>(ms), levelName(level),
                 static_cast<int>(component.size()), component.data(), static_cast<int>(message.size()),
                 message.data());
}

}  // namespace airlock

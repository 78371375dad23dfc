#include "core/Clock.hpp"

#include <cstdio>
#include <ctime>

namespace airlock {

std::string formatTimestamp(std::chrono::system_clock::time_point tp) {
    std::time_t t = std::chrono::system_clock::to_time_t(tp);
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(tp.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[40];
    std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms));
    return buf;
}

std::optional<std::int64_t> parseTimestamp(const std::string& text) {
    if (text.size() < 20 || text.size() > 40) return std::nullopt;
    auto digits = [&](std::size_t at, std::size_t n, int& out) {
        out = 0;
        for (std::size_t i = at; i < at + n; ++i) {
            if (i >= text.size() || text[i] < '0' || text[i] > '9') return false;
            out = out * 10 + (text[i] - '0');
        }
        return true;
    };
    std::tm tm{};
    int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
    if (!digits(0, 4, year) || text[4] != '-' || !digits(5, 2, month) || text[7] != '-' ||
        !digits(8, 2, day) || (text[10] != 'T' && text[10] != 't') || !digits(11, 2, hour) ||
        text[13] != ':' || !digits(14, 2, minute) || text[16] != ':' || !digits(17, 2, second))
        return std::nullopt;
    if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60)
        return std::nullopt;
    std::size_t i = 19;
    if (i < text.size() && text[i] == '.') {
        ++i;
        std::size_t start = i;
        while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
        if (i == start) return std::nullopt;
    }
    std::int64_t offset = 0;
    if (i < text.size() && (text[i] == 'Z' || text[i] == 'z')) {
        ++i;
    } else if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
        int oh = 0, om = 0;
        if (!digits(i + 1, 2, oh) || i + 3 >= text.size() || text[i + 3] != ':' ||
            !digits(i + 4, 2, om) || oh > 23 || om > 59)
            return std::nullopt;
        offset = (text[i] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
        i += 6;
    } else {
        return std::nullopt;
    }
    if (i != text.size()) return std::nullopt;
    tm.tm_year = year - 1900;
    tm.tm_mon = month - 1;
    tm.tm_mday = day;
    tm.tm_hour = hour;
    tm.tm_min = minute;
    tm.tm_sec = second;
    std::time_t t = timegm(&tm);
    if (tm.tm_mday != day) return std::nullopt;  // 31 February and the like
    return static_cast<std::int64_t>(t) - offset;
}

}  // namespace airlock

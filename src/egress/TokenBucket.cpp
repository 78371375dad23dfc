#include "egress/TokenBucket.hpp"

#include <algorithm>

namespace airlock::egress {

TokenBucket::TokenBucket(std::uint64_t bytesPerSecond, Clock::time_point start)
    : rate_(std::max<std::uint64_t>(bytesPerSecond, 1)),
      tokens_(static_cast<double>(rate_)),
      last_(start) {}

std::chrono::nanoseconds TokenBucket::take(std::uint64_t bytes, Clock::time_point now) {
    std::lock_guard lock(mutex_);
    if (now > last_) {
        double elapsed = std::chrono::duration<double>(now - last_).count();
        tokens_ =
            std::min(static_cast<double>(rate_), tokens_ + elapsed * static_cast<double>(rate_));
        last_ = now;
    }
    tokens_ -= static_cast<double>(bytes);
    if (tokens_ >= 0) return std::chrono::nanoseconds(0);
    return std::chrono::nanoseconds(
        static_cast<std::int64_t>(-tokens_ / static_cast<double>(rate_) * 1e9));
}

}  // namespace airlock::egress

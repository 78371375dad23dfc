#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>

namespace airlock::egress {

// A sandbox's egress bandwidth: `rate` bytes per second shared by all its
// connections, in both directions, with one second's worth of burst. Bytes
// are always taken; the answer is how long the taker should pause so that
// the average stays at the rate. Thread-safe.
class TokenBucket {
  public:
    using Clock = std::chrono::steady_clock;
    explicit TokenBucket(std::uint64_t bytesPerSecond, Clock::time_point start = Clock::now());
    std::chrono::nanoseconds take(std::uint64_t bytes, Clock::time_point now = Clock::now());
    std::uint64_t rate() const { return rate_; }

  private:
    std::mutex mutex_;
    std::uint64_t rate_;
    double tokens_;
    Clock::time_point last_;
};

}  // namespace airlock::egress

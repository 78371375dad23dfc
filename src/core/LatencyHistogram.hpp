#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace airlock {

// A Prometheus histogram of durations in seconds, lock-free to observe.
class LatencyHistogram {
  public:
    static constexpr std::array<double, 11> kBounds{0.05, 0.1, 0.25, 0.5, 1,  2.5,
                                                    5,    10,  30,   60,  300};
    void observe(double seconds);
    // The text exposition of `name` (with # HELP and # TYPE lines).
    std::string exposition(const std::string& name, const std::string& help) const;

  private:
    std::array<std::atomic<std::uint64_t>, kBounds.size() + 1> counts_{};  // last: +Inf
    std::atomic<std::uint64_t> sumMicros_{0};
};

}  // namespace airlock

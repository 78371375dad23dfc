#include "core/LatencyHistogram.hpp"

#include <cstdio>

namespace airlock {

void LatencyHistogram::observe(double seconds) {
    if (seconds < 0) seconds = 0;
    std::size_t i = 0;
    while (i < kBounds.size() && seconds > kBounds[i]) ++i;
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sumMicros_.fetch_add(static_cast<std::uint64_t>(seconds * 1e6), std::memory_order_relaxed);
}

std::string LatencyHistogram::exposition(const std::string& name, const std::string& help) const {
    std::string out = "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
    std::uint64_t cumulative = 0;
    char line[160];
    for (std::size_t i = 0; i <= kBounds.size(); ++i) {
        cumulative += counts_[i].load(std::memory_order_relaxed);
        if (i < kBounds.size())
            std::snprintf(line, sizeof line, "%s_bucket{le=\"%g\"} %llu\n", name.c_str(),
                          kBounds[i], static_cast<unsigned long long>(cumulative));
        else
            std::snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %llu\n", name.c_str(),
                          static_cast<unsigned long long>(cumulative));
        out += line;
    }
    std::snprintf(line, sizeof line, "%s_sum %.6f\n%s_count %llu\n", name.c_str(),
                  static_cast<double>(sumMicros_.load()) / 1e6, name.c_str(),
                  static_cast<unsigned long long>(cumulative));
    out += line;
    return out;
}

}  // namespace airlock

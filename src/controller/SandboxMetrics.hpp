#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "controller/SandboxAccess.hpp"
#include "protocol/GuestResults.hpp"

namespace airlock {

// One sample of a sandbox's use, as the guest's kernel counts it.
struct MetricSample {
    std::int64_t unixMs = 0;  // the host's clock, when it was taken
    std::uint32_t cpuCount = 0;
    double cpuUsedPct = 0;  // 0-100 over all vCPUs, since the sample before
    std::uint64_t memUsed = 0, memTotal = 0, memCache = 0;  // bytes
    std::uint64_t diskUsed = 0, diskTotal = 0;              // the root filesystem, bytes
};

// Sandboxes' CPU, memory and disk over time. Nothing is sampled until
// someone asks: the first question about a running sandbox samples it at
// once, and from then on it is sampled every kInterval while it runs (a
// paused one is skipped). Bounded: kMaxSamples per sandbox (an hour), at
// most kMaxSeries sandboxes (the longest unasked go first); a sandbox's
// samples outlive it by kKeepAfterGone, for its owner only.
class SandboxMetrics {
  public:
    static constexpr auto kInterval = std::chrono::seconds(5);
    static constexpr std::size_t kMaxSamples = 720;
    static constexpr std::size_t kMaxSeries = 512;
    static constexpr auto kKeepAfterGone = std::chrono::minutes(15);
    // How far apart the two readings of a first sample are (CPU use is a rate).
    static constexpr auto kFirstSpan = std::chrono::milliseconds(250);

    explicit SandboxMetrics(SandboxAccess& sandboxes) : sandboxes_(sandboxes) {}
    ~SandboxMetrics();
    SandboxMetrics(const SandboxMetrics&) = delete;
    SandboxMetrics& operator=(const SandboxMetrics&) = delete;

    // The caller's sandbox's samples taken between `fromMs` and `toMs`
    // (Unix ms, inclusive), oldest first. A sandbox that is not (or no
    // longer) the caller's has none; Error(bad_request) when from > to.
    std::vector<MetricSample> samples(const std::string& tenant, const std::string& id,
                                      std::optional<std::int64_t> fromMs = std::nullopt,
                                      std::optional<std::int64_t> toMs = std::nullopt);
    // Each named sandbox's latest stored sample; those with none (never
    // asked about on their own) are left out.
    std::map<std::string, MetricSample> latest(const std::string& tenant,
                                               const std::vector<std::string>& ids);
    // One round of the sampler (the thread calls it; tests call it directly).
    void sampleAll();
    // Ends the sampler (joined): before the sessions it opens are closed.
    void stop();

  private:
    struct Series {
        std::string tenant;
        std::deque<MetricSample> samples;
        std::optional<protocol::GuestUsage> last;  // the reading the next rate starts from
        std::chrono::steady_clock::time_point askedAt;
        std::optional<std::chrono::steady_clock::time_point> goneAt;
    };
    // Starts following a running sandbox (with a first sample); false when
    // it is not the caller's or not running.
    void follow(const std::string& tenant, const std::string& id);
    protocol::GuestUsage readUsage(const std::string& id);
    void append(const std::string& id, const protocol::GuestUsage& usage);
    void evictLocked();
    void startThreadLocked();

    SandboxAccess& sandboxes_;
    std::mutex mutex_;
    std::map<std::string, Series> series_;
    std::condition_variable wake_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace airlock

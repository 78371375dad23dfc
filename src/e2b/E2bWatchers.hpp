#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "controller/GuestFiles.hpp"
#include "core/Error.hpp"

namespace airlock::e2b {

// envd's polled watchers (CreateWatcher, GetWatcherEvents, RemoveWatcher;
// E2B's Python sync SDK watches this way): a guest dir_watch each, whose
// events wait here until the next poll. They outlive the request that made
// them, until removed. Bounded: kMaxLivePerSandbox watching at once; the
// events waiting hold the guest's window, so a watcher nobody polls stops
// its guest's watch, which then ends (resource_exhausted) and says so on
// the next poll; an ended watcher is forgotten kKeepEnded after it ended,
// or sooner when more than kMaxEndedPerSandbox ended ones wait (oldest first).
class E2bWatchers {
  public:
    static constexpr std::size_t kMaxLivePerSandbox = 16;
    static constexpr auto kStartWait = std::chrono::seconds(15);
    static constexpr auto kKeepEnded = std::chrono::minutes(10);
    static constexpr std::size_t kMaxEndedPerSandbox = 16;

    explicit E2bWatchers(GuestFiles& files) : files_(files) {}
    ~E2bWatchers();
    E2bWatchers(const E2bWatchers&) = delete;
    E2bWatchers& operator=(const E2bWatchers&) = delete;

    // Its id ("w" and 20 characters), once the guest's watch is in place.
    // The guest's refusal (not_found, bad_request...) as a typed Error.
    std::string create(const std::string& tenant, const std::string& sandboxId,
                       const protocol::DirWatchRequest& request, bool includeEntry);
    // The events since the last call (FilesystemEvent JSON), then cleared.
    // Error(not_found) for an unknown id (or another sandbox's); a watcher
    // that failed answers its failure.
    nlohmann::json events(const std::string& sandboxId, const std::string& watcherId);
    // Error(not_found) for an unknown id.
    void remove(const std::string& sandboxId, const std::string& watcherId);

  private:
    // What the agent's thread touches: the watcher alone (never the
    // registry), so a late event after the registry went finds nothing.
    struct Watcher {
        std::mutex mutex;
        std::condition_variable started_;
        std::string sandboxId;
        bool includeEntry = false;
        bool started = false;
        std::optional<Error> failure;
        std::optional<std::chrono::steady_clock::time_point> endedAt;
        std::shared_ptr<AgentStream> stream;
        // Each event keeps its bytes of the guest's window until it is read.
        std::deque<std::pair<nlohmann::json, std::shared_ptr<void>>> waiting;
    };
    void pruneLocked();
    std::shared_ptr<Watcher> find(const std::string& sandboxId, const std::string& watcherId);

    GuestFiles& files_;
    std::mutex mutex_;  // the map; a watcher's own fields under its own mutex
    std::map<std::string, std::shared_ptr<Watcher>> watchers_;
};

}  // namespace airlock::e2b

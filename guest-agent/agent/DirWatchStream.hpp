#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "agent/StreamHandler.hpp"
#include "agent/UserDb.hpp"
#include "core/UniqueFd.hpp"
#include "protocol/GuestCalls.hpp"
#include "protocol/GuestResults.hpp"

namespace airlock::guest {

// Op dir_watch: a directory's changes as inotify reports them, one record
// per line (protocol::WatchRecord), a "started" record first once every
// watch is in place. Recursive watches follow directories made (or moved
// in) after the start: each is watched at once and what it already holds
// is reported as created, so nothing made in it is missed. Runs with the
// user's file-system identity. Bounded: kMaxWatches directories, kMaxPending
// bytes of records the host has not taken (the kernel's queue is read no
// further until it does; when that overflows the watch ends, saying so).
class DirWatchStream : public StreamHandler {
  public:
    static constexpr std::size_t kMaxWatches = 8192;
    static constexpr std::size_t kMaxPending = 1024 * 1024;
    static constexpr std::size_t kMaxLive = 64;  // open at once, in this agent
    static std::size_t live() { return live_; }

    DirWatchStream(std::uint32_t id, FrameSink& sink, const protocol::DirWatchRequest& request);
    ~DirWatchStream() override { --live_; }
    void collectFds(PollSet& set) override;
    void onFdReady(int fd, short revents) override;
    void tick(std::int64_t nowMs) override;
    bool readyToProduce() const override;

  private:
    // Watches dir and, when recursive, the directories below it; with
    // `report`, what they hold is reported as created. False once failed.
    bool watchTree(const std::string& rel, bool report);
    // Drops the watches of a directory and everything below it (moved away).
    void unwatchTree(const std::string& rel);
    void readEvents();
    void emit(protocol::WatchRecord::Kind kind, const std::string& rel);
    void flush();
    std::string full(const std::string& rel) const { return rel.empty() ? root_ : root_ + "/" + rel; }

    UniqueFd fd_;
    std::string root_;
    bool recursive_ = false;
    UserEntry user_;
    int rootWd_ = -1;
    std::map<int, std::string> dirs_;  // watch -> directory relative to the root
    std::string pending_;              // whole lines not yet sent
    std::optional<std::uint32_t> uploadCookie_;  // an upload's rename into place, half seen
    static inline std::size_t live_ = 0;  // the agent is single-threaded
};

}  // namespace airlock::guest

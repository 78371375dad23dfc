#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/UniqueFd.hpp"
#include "protocol/GuestResults.hpp"

namespace airlock::guest {

// Reads and writes under one directory (the workspace) made by the guest's
// processes, summarised per path: first and last time, counts, and which
// command (the host's exec id, "trace") made them. fanotify when the kernel
// has it (it names the process, so the command can be found); else inotify,
// which sees writes only and names no process. The agent's own file work
// (the files API, the workspace checkout) is not recorded: the host records
// that itself. Bounded: at most kMaxPaths paths between two drains.
class FileActivity {
  public:
    static constexpr std::size_t kMaxPaths = protocol::kMaxActivityPaths;
    static constexpr std::size_t kMaxTracesPerPath = protocol::kMaxActivityExecs;
    static constexpr std::size_t kMaxInotifyDirs = 8192;
    // Resolves a process to the trace of the command it belongs to ("" if none).
    using TraceOf = std::function<std::string(pid_t)>;

    // Starts watching `root` (an absolute directory). Returns "" or an error.
    // `forceInotify` is for tests of the fallback.
    std::string watch(const std::string& root, bool forceInotify = false);
    bool watching() const { return static_cast<bool>(fd_); }
    int fd() const { return fd_.get(); }
    // Reads what is queued (the fd is non-blocking).
    void onReadable(const TraceOf& traceOf);
    // The summary since the last drain, which it clears; times are the
    // guest's wall clock in Unix ms.
    protocol::FileActivityReport drain();

  private:
    struct PathStats {
        std::uint64_t reads = 0, writes = 0;
        std::int64_t firstMs = 0, lastMs = 0, firstWriteMs = 0, lastWriteMs = 0;
        std::set<std::string> traces;
        std::string lastWriteTrace;
    };
    void record(const std::string& absPath, bool read, bool write, const std::string& trace);
    void readFanotify(const TraceOf& traceOf);
    void readInotify();
    // Watches dir and the directories below it; in a new one (made after the
    // watch began) the files already there are recorded as written.
    void addInotifyTree(const std::string& dir, bool isNew);

    UniqueFd fd_;
    std::string root_;
    std::string mechanism_;
    std::map<std::string, PathStats> paths_;
    std::uint64_t dropped_ = 0;
    bool overflow_ = false;
    std::map<int, std::string> inotifyDirs_;  // watch descriptor -> absolute directory
};

}  // namespace airlock::guest

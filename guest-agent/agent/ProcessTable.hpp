#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/Spawn.hpp"
#include "agent/StreamHandler.hpp"
#include "protocol/GuestResults.hpp"

namespace airlock::guest {

// The last `capacity` bytes of a process's output, addressed by absolute
// offsets so readers can tell what they missed.
class OutputRing {
public:
    explicit OutputRing(std::size_t capacity) : capacity_(capacity) {}
    void append(std::string_view bytes);
    std::uint64_t begin() const { return end_ - data_.size(); }
    std::uint64_t end() const { return end_; }
    // Up to `max` bytes from absolute offset `from` (clamped to begin()).
    std::string read(std::uint64_t from, std::size_t max) const;

private:
    std::size_t capacity_;
    std::string data_;  // oldest first; trimmed from the front
    std::uint64_t end_ = 0;
};

// A command started as a resource with a handle: it outlives the stream that
// started it and any host session; its output goes to a bounded ring, so it
// never blocks on a slow or absent reader.
class BackgroundProcess {
public:
    static constexpr std::size_t kRingBytes = 1024 * 1024;
    static constexpr std::size_t kDrainOnExitBytes = 4 * kRingBytes;
    BackgroundProcess(const protocol::ExecRequest& request, Spawned spawned);
    ~BackgroundProcess();

    pid_t pid() const { return spawned_.pid; }
    bool running() const { return !exited_; }
    const std::string& trace() const { return trace_; }
    void collectFds(std::vector<pollfd>& fds, std::vector<BackgroundProcess*>& owners);
    void onFdReady(int fd);
    void reap();
    void signal(int sig);
    // Feeds stdin; false once stdin is closed.
    bool writeStdin(std::string_view bytes);
    void closeStdin() { spawned_.stdinFd.reset(); }
    const OutputRing& output() const { return output_; }
    protocol::ProcessInfo describe() const;

private:
    Spawned spawned_;
    std::vector<std::string> argv_;
    std::string startedAt_;
    OutputRing output_;
    bool exited_ = false;
    int exitCode_ = -1;
    int signal_ = 0;
    std::string trace_;
};

// Every background process of this agent, bounded in number.
class ProcessTable {
public:
    static constexpr std::size_t kMaxProcesses = 64;

    // Starts one; returns its description, or nullopt with the reset's code and text.
    std::optional<protocol::ProcessInfo> start(const protocol::ExecRequest& request, std::string& errorCode, std::string& error);
    BackgroundProcess* find(pid_t pid) const;
    std::size_t runningCount() const;
    // The one running process, if exactly one runs.
    BackgroundProcess* onlyRunning() const;
    protocol::ProcessList list() const;
    void collectFds(std::vector<pollfd>& fds, std::vector<BackgroundProcess*>& owners);
    void reapAll();

private:
    std::map<pid_t, std::unique_ptr<BackgroundProcess>> processes_;
};

// Streams a background process's output ring; with follow, keeps streaming
// until the process exited and everything was sent.
class ProcessLogStream : public StreamHandler {
public:
    ProcessLogStream(std::uint32_t id, FrameSink& sink, ProcessTable& table, pid_t pid, bool follow);
    void tick(std::int64_t nowMs) override;
    bool readyToProduce() const override;

private:
    ProcessTable& table_;
    pid_t pid_;
    bool follow_;
    std::uint64_t cursor_;
};

}  // namespace airlock::guest

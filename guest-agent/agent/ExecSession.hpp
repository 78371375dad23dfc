#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "core/UniqueFd.hpp"
#include "protocol/Messages.hpp"

namespace airlock::guest {

// One command started for one stream: its process group, its pipes, the
// output credit the host granted, and its deadline.
class ExecSession {
public:
    // Forks and execs. On failure to start, `result()` carries the error and
    // finished() is true at once.
    ExecSession(std::uint32_t stream, const protocol::ExecRequest& request);
    ~ExecSession();
    ExecSession(const ExecSession&) = delete;
    ExecSession& operator=(const ExecSession&) = delete;

    std::uint32_t stream() const { return stream_; }
    int stdoutFd() const { return stdout_.get(); }
    int stderrFd() const { return stderr_.get(); }
    int stdinFd() const { return stdin_.get(); }
    bool wantsStdinWrite() const { return stdin_.valid() && stdinOffset_ < stdinData_.size(); }

    std::uint32_t credit() const { return credit_; }
    void addCredit(std::uint32_t c);
    void spendCredit(std::uint32_t c) { credit_ -= c; }

    // Reads from one output pipe; returns the bytes (empty at EOF or when
    // nothing is ready). Closes the pipe at EOF.
    std::string readOutput(int fd, std::size_t max);
    void writeStdin();

    // Called by the agent with each reaped status of the main process.
    void onExited(int waitStatus);
    pid_t pid() const { return pid_; }
    bool exited() const { return exited_; }

    // Kills the whole process group (timeout, cancel, or main process gone).
    void killGroup();
    // Called periodically: enforces the timeout and the post-exit grace.
    void tick(std::int64_t nowMs);
    std::int64_t nextDeadlineMs() const;

    bool finished() const { return exited_ && !stdout_.valid() && !stderr_.valid(); }
    const protocol::ExecResult& result() const { return result_; }

private:
    void spawn(const protocol::ExecRequest& request);

    std::uint32_t stream_;
    pid_t pid_ = -1;
    UniqueFd stdin_, stdout_, stderr_;
    std::string stdinData_;
    std::size_t stdinOffset_ = 0;
    std::uint32_t credit_;
    std::int64_t deadlineMs_ = 0;  // 0: none
    std::int64_t exitedAtMs_ = 0;
    bool exited_ = false;
    bool groupKilled_ = false;
    protocol::ExecResult result_;
};

}  // namespace airlock::guest

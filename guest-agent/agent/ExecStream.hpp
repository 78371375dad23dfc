#pragma once
#include <sys/types.h>

#include <memory>
#include <string>

#include "agent/Spawn.hpp"
#include "agent/TerminalJudge.hpp"
#include "agent/StreamHandler.hpp"
#include "protocol/Messages.hpp"

namespace airlock::guest {

// A foreground command bound to its stream: output streams to the host under
// credit, stdin comes from the request or from data frames, signals and
// resizes from control frames. It dies with its stream (reset, timeout, host
// session gone): the destructor kills the whole process group.
class ExecStream : public StreamHandler {
public:
    ExecStream(std::uint32_t id, FrameSink& sink, const protocol::ExecRequest& request);
    ~ExecStream() override;

    void collectFds(PollSet& set) override;
    void onFdReady(int fd, short revents) override;
    void onData(std::uint8_t channel, std::string bytes) override;
    void onCloseWrite() override;
    void onControl(const protocol::ControlFrame& frame) override;
    void tick(std::int64_t nowMs) override;
    std::int64_t nextDeadlineMs() const override;
    // The command's session (it runs in its own): the leader's pid, which
    // stays its id while members remain, even after the leader exits.
    pid_t sessionPid() const { return child_.pid; }
    const std::string& trace() const { return trace_; }

private:
    void pumpOutput(UniqueFd& fd, std::uint8_t channel, std::uint64_t& sent);
    void writeStdin();
    void reap();
    void killGroup();

    Spawned child_;
    bool tty_;
    std::uint64_t outputCap_;
    std::uint64_t sentOut_ = 0, sentErr_ = 0;
    std::string stdinPending_;
    bool stdinEof_ = false;
    std::int64_t deadlineMs_ = 0;
    std::int64_t exitedAtMs_ = 0;
    bool exited_ = false;
    bool groupKilled_ = false;
    protocol::ExecResult result_;
    std::string trace_;
    std::unique_ptr<TerminalJudge> judge_;  // a judged terminal's socket (judge_lines)
};

std::int64_t monotonicMs();

}  // namespace airlock::guest

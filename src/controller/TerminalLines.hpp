#pragma once
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "controller/SandboxCommands.hpp"
#include "protocol/ControlFrames.hpp"

namespace airlock {

// The host half of a judged terminal (protocol::isJudgeableShell on a tty),
// one per terminal, for every door that opens one (the exec WebSocket, the
// E2B door's pty): each line the guest's shell asks about (LineToJudge) is
// judged on a worker by SandboxCommands::judgeLine and its verdict sent back
// (LineVerdict). One line at a time: the shell waits for each, so a new
// line while one is judged or held means the shell gave up on that one (^C):
// it is withdrawn and its decision goes nowhere. At most kLinesPerSecond
// after a burst
// of kLineBurst, since each line is an audit record and a guest's shell
// could ask as fast as it is answered: a line beyond waits its turn, it is
// not refused. A line held for approval is withdrawn when the terminal
// closes; nothing is sent after close(). Thread-safe.
class TerminalLines : public std::enable_shared_from_this<TerminalLines> {
  public:
    struct Terminal {
        std::string tenant, sandboxId;
        std::string execId;   // the terminal's own (each line's record names it)
        ExecOptions options;  // what it was opened with: user, cwd, env, caller
    };
    // To the guest, on the terminal's stream (never blocks).
    using Send = std::function<void(const protocol::LineVerdict&)>;
    // A line is held for approval ("pending"), and then how that was
    // decided: for a door that tells its client.
    using Held = std::function<void(const LineDecision&)>;
    static constexpr double kLineBurst = 60, kLinesPerSecond = 10;

    static std::shared_ptr<TerminalLines> open(SandboxCommands& commands,
                                               boost::asio::thread_pool& workers,
                                               Terminal terminal, Send send, Held held = nullptr);
    void onLine(protocol::LineToJudge line);
    void close();

  private:
    TerminalLines(SandboxCommands& commands, boost::asio::thread_pool& workers, Terminal terminal,
                  Send send, Held held)
        : commands_(commands),
          workers_(workers),
          terminal_(std::move(terminal)),
          send_(std::move(send)),
          held_(std::move(held)) {}
    void judge(protocol::LineToJudge line);
    void answer(std::uint32_t id, const LineDecision& decision);
    void withdraw(std::string gate);  // a held line's approval, on a worker

    SandboxCommands& commands_;
    boost::asio::thread_pool& workers_;
    const Terminal terminal_;
    const Send send_;
    const Held held_;
    std::mutex mutex_;
    bool closed_ = false;
    std::uint32_t judging_ = 0;  // the line being judged or held (0: none)
    std::string gate_;           // the held line's exec id
    double tokens_ = kLineBurst;
    std::chrono::steady_clock::time_point refilled_ = std::chrono::steady_clock::now();
    std::uint64_t delayed_ = 0;  // the timer of a line waiting its turn
};

}  // namespace airlock

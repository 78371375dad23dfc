#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "agent/StreamHandler.hpp"
#include "core/UniqueFd.hpp"
#include "protocol/ControlFrames.hpp"
#include "protocol/Messages.hpp"

namespace airlock::guest {

// The guest half of a judged terminal (ExecRequest.judge_lines): before an
// interactive bash runs a typed line, its DEBUG trap (kHook) runs
// `airlock-agent judge LINE`, which asks over this terminal's socket. The
// line goes to the host as a LineToJudge control frame; the host's
// LineVerdict goes back to the waiting shell, which runs the line or skips
// it. One line at a time; a line past kMaxJudgedLine is refused here.
// Cooperative by nature: the shell's user can unset the trap, so the host
// records each line as the guest shell reported it.
class TerminalJudge {
  public:
    // Makes `request` (bash on a tty, protocol::isJudgeableShell) judge its
    // lines: a socket only the command's user may use, the hook in place of
    // the startup files (which it reads itself), the environment naming the
    // socket. nullptr and `error` when that cannot be set up.
    static std::unique_ptr<TerminalJudge> prepare(protocol::ExecRequest& request,
                                                  std::string& error);
    ~TerminalJudge();
    TerminalJudge(const TerminalJudge&) = delete;
    TerminalJudge& operator=(const TerminalJudge&) = delete;

    void collectFds(PollSet& set, StreamHandler* owner) const;
    bool owns(int fd) const;
    // A line complete on the socket, to send to the host.
    std::optional<protocol::LineToJudge> onFdReady(int fd);
    void onVerdict(const protocol::LineVerdict& verdict);

  private:
    TerminalJudge(UniqueFd listener, std::string path)
        : listener_(std::move(listener)), path_(std::move(path)) {}
    void answer(const std::string& text, bool final);

    UniqueFd listener_, client_;
    std::string path_;
    std::string line_;
    bool asked_ = false;  // the client's line went to the host
    std::uint32_t nextId_ = 0;
};

// `airlock-agent judge LINE` (the hook's side): asks the terminal's socket
// ($AIRLOCK_JUDGE_SOCKET) and prints what the host said; exit 0 to run the
// line, 1 to skip it.
int runJudgeClient(int argc, char** argv);

}  // namespace airlock::guest

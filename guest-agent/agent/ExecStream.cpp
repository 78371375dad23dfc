#include "agent/ExecStream.hpp"

#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "protocol/GuestResults.hpp"

namespace airlock::guest {
namespace {
// After the main process exits, how long its pipes may stay open (a
// daemonised grandchild) before the command is declared over.
constexpr std::int64_t kPostExitGraceMs = 2000;
constexpr std::size_t kMaxStdinPending = protocol::kInitialWindow;
}  // namespace

std::int64_t monotonicMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

ExecStream::ExecStream(std::uint32_t id, FrameSink& sink, const protocol::ExecRequest& request)
    : StreamHandler(id, sink), tty_(request.tty), outputCap_(request.output_cap), trace_(request.trace) {
    protocol::ExecRequest judged = request;
    bool judging = request.judge_lines && request.tty && protocol::isJudgeableShell(request.argv);
    if (judging) {
        std::string why;
        judge_ = TerminalJudge::prepare(judged, why);
        if (!judge_) {  // never an unjudged shell where a judged one was asked for
            child_.exitCode = 126;
            child_.error = "the terminal could not be judged line by line: " + why;
        }
    }
    if (!judging || judge_) child_ = spawnProcess(judged);
    if (child_.pid < 0) {
        result_.exit_code = child_.exitCode;
        result_.error = child_.error;
        exited_ = true;
        finish(nlohmann::json::parse(protocol::toJson(result_)));
        return;
    }
    stdinPending_ = request.stdin_data;
    stdinEof_ = !request.stdin_stream;
    if (request.timeout_ms > 0) deadlineMs_ = monotonicMs() + static_cast<std::int64_t>(request.timeout_ms);
    sendControl(protocol::ExecStarted{static_cast<std::uint32_t>(child_.pid)});
    writeStdin();
}

ExecStream::~ExecStream() {
    if (!exited_ && child_.pid > 0) {
        killGroup();
        ::waitpid(child_.pid, nullptr, 0);
    }
}

void ExecStream::killGroup() {
    if (child_.pid > 0 && !groupKilled_) {
        ::kill(-child_.pid, SIGKILL);
        groupKilled_ = true;
    }
}

void ExecStream::collectFds(PollSet& set) {
    if (done()) return;
    if (judge_ && !exited_) judge_->collectFds(set, this);
    bool canSend = sendable() > 0;
    if (child_.stdoutFd && (canSend || (outputCap_ && sentOut_ >= outputCap_))) set.add(child_.stdoutFd.get(), POLLIN, this);
    if (child_.stderrFd && (canSend || (outputCap_ && sentErr_ >= outputCap_))) set.add(child_.stderrFd.get(), POLLIN, this);
    if (child_.stdinFd && !stdinPending_.empty()) set.add(child_.stdinFd.get(), POLLOUT, this);
}

void ExecStream::onFdReady(int fd, short) {
    if (judge_ && judge_->owns(fd)) {
        if (auto line = judge_->onFdReady(fd)) sendControl(*line);
        return;
    }
    if (fd == child_.stdoutFd.get()) pumpOutput(child_.stdoutFd, 1, sentOut_);
    else if (fd == child_.stderrFd.get()) pumpOutput(child_.stderrFd, 2, sentErr_);
    else if (fd == child_.stdinFd.get()) writeStdin();
}

void ExecStream::pumpOutput(UniqueFd& fd, std::uint8_t channel, std::uint64_t& sent) {
    bool draining = outputCap_ && sent >= outputCap_;
    std::size_t max = draining ? 64 * 1024 : sendable();
    if (outputCap_ && !draining) max = std::min<std::uint64_t>(max, outputCap_ - sent);
    if (max == 0) return;
    std::string buf(max, '\0');
    ssize_t n = ::read(fd.get(), buf.data(), max);
    if (n > 0) {
        buf.resize(static_cast<std::size_t>(n));
        if (draining) {
            result_.truncated = true;  // drained and dropped: the cap keeps the channel free
            return;
        }
        sent += buf.size();
        sendData(channel, buf);
        return;
    }
    // EOF, or EIO on a pty whose last holder is gone.
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        if (tty_ && fd.get() == child_.stdoutFd.get()) child_.stdinFd.reset();
        fd.reset();
    }
}

void ExecStream::writeStdin() {
    while (child_.stdinFd && !stdinPending_.empty()) {
        ssize_t n = ::write(child_.stdinFd.get(), stdinPending_.data(), stdinPending_.size());
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) return;
            stdinPending_.clear();  // the command closed its stdin: drop the rest
            if (!tty_) child_.stdinFd.reset();
            return;
        }
        stdinPending_.erase(0, static_cast<std::size_t>(n));
        grant(static_cast<std::size_t>(n));
    }
    if (stdinPending_.empty() && stdinEof_ && !tty_) child_.stdinFd.reset();
}

void ExecStream::onData(std::uint8_t channel, std::string bytes) {
    if (channel != 0) return fail("bad_frame", "exec streams take stdin on channel 0 only");
    if (stdinEof_ || !child_.stdinFd) {
        grant(bytes.size());  // nobody reads it any more: drop, keep the window honest
        return;
    }
    if (stdinPending_.size() + bytes.size() > kMaxStdinPending) return fail("flow_control", "stdin overran its window");
    stdinPending_ += bytes;
    writeStdin();
}

void ExecStream::onCloseWrite() {
    stdinEof_ = true;
    if (tty_ && child_.stdinFd) {
        // A terminal has no EOF: send the line discipline's end-of-file (^D).
        stdinPending_ += '\x04';
    }
    writeStdin();
}

void ExecStream::onControl(const protocol::ControlFrame& frame) {
    if (child_.pid <= 0 || exited_) return;
    if (auto* sig = std::get_if<protocol::SignalRequest>(&frame)) {
        int s = signalFromName(sig->signal);
        if (s) ::kill(-child_.pid, s);
    }
    if (auto* v = std::get_if<protocol::LineVerdict>(&frame); v && judge_) judge_->onVerdict(*v);
    if (auto* rs = std::get_if<protocol::ResizeRequest>(&frame); rs && tty_ && child_.stdinFd) {
        winsize ws{static_cast<unsigned short>(rs->rows), static_cast<unsigned short>(rs->cols), 0, 0};
        ::ioctl(child_.stdinFd.get(), TIOCSWINSZ, &ws);
    }
}

void ExecStream::reap() {
    if (exited_ || child_.pid <= 0) return;
    int status = 0;
    if (::waitpid(child_.pid, &status, WNOHANG) != child_.pid) return;
    exited_ = true;
    exitedAtMs_ = monotonicMs();
    if (WIFEXITED(status)) {
        result_.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        result_.signal = WTERMSIG(status);
        result_.exit_code = 128 + WTERMSIG(status);
    }
    if (!tty_) child_.stdinFd.reset();
    // Leftover members of the group would keep the pipes open: the command is over.
    killGroup();
}

void ExecStream::tick(std::int64_t now) {
    if (done()) return;
    reap();
    if (!exited_ && deadlineMs_ > 0 && now >= deadlineMs_) {
        result_.timed_out = true;
        killGroup();
    }
    if (exited_ && now - exitedAtMs_ > kPostExitGraceMs) {
        child_.stdoutFd.reset();
        child_.stderrFd.reset();
    }
    if (exited_ && !child_.stdoutFd && !child_.stderrFd) finish(nlohmann::json::parse(protocol::toJson(result_)));
}

std::int64_t ExecStream::nextDeadlineMs() const {
    if (!exited_ && deadlineMs_ > 0) return deadlineMs_;
    if (exited_) return exitedAtMs_ + kPostExitGraceMs;
    return 0;
}

}  // namespace airlock::guest

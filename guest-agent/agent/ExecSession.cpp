#include "agent/ExecSession.hpp"

#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "agent/UserDb.hpp"
#include "protocol/Frame.hpp"

namespace airlock::guest {
namespace {

std::int64_t nowMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// How long after the main process exits we still wait for its pipes to reach
// EOF (a daemonised grandchild may hold them open forever).
constexpr std::int64_t kPostExitGraceMs = 2000;

struct ChildFailure {
    int stage;
    int err;
};

[[noreturn]] void childFail(int errPipe, int stage) {
    ChildFailure f{stage, errno};
    (void)!::write(errPipe, &f, sizeof f);
    ::_exit(127);
}

const char* stageName(int stage) {
    switch (stage) {
        case 1: return "setting up stdio";
        case 2: return "changing directory";
        case 3: return "dropping privileges";
        case 4: return "executing the program";
        default: return "starting";
    }
}

void makePipe(UniqueFd& readEnd, UniqueFd& writeEnd) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    readEnd.reset(fds[0]);
    writeEnd.reset(fds[1]);
}

void setNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace

ExecSession::ExecSession(std::uint32_t stream, const protocol::ExecRequest& request)
    : stream_(stream), credit_(protocol::kInitialWindow) {
    try {
        spawn(request);
    } catch (const std::exception& e) {
        result_.error = e.what();
        exited_ = true;
        stdin_.reset();
        stdout_.reset();
        stderr_.reset();
    }
}

ExecSession::~ExecSession() {
    if (!exited_ && pid_ > 0) {
        killGroup();
        ::waitpid(pid_, nullptr, 0);
    }
}

void ExecSession::spawn(const protocol::ExecRequest& request) {
    auto user = lookupUser(request.user);
    if (!user) throw std::runtime_error("unknown user '" + request.user + "'");

    std::vector<std::string> envStrings = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME=" + user->home, "USER=" + user->name, "LOGNAME=" + user->name,
        "SHELL=" + (user->shell.empty() ? std::string("/bin/sh") : user->shell), "LANG=C.UTF-8",
        "TERM=xterm-256color"};
    for (const auto& [k, v] : request.env) {
        std::string prefix = k + "=";
        std::erase_if(envStrings, [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
        envStrings.push_back(prefix + v);
    }
    std::string cwd = request.cwd.empty() ? user->home : request.cwd;

    // Everything the child needs is prepared before fork: after fork only
    // async-signal-safe calls happen.
    std::vector<char*> argv, envp;
    for (const auto& a : request.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& e : envStrings) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    std::string path;
    for (const auto& e : envStrings)
        if (e.rfind("PATH=", 0) == 0) path = e.substr(5);

    UniqueFd inRead, inWrite, outRead, outWrite, errRead, errWrite, failRead, failWrite;
    makePipe(inRead, inWrite);
    makePipe(outRead, outWrite);
    makePipe(errRead, errWrite);
    makePipe(failRead, failWrite);

    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
    if (pid == 0) {
        int fail = failWrite.get();
        ::setsid();  // own process group: timeouts and cancels kill the whole group
        if (::dup2(inRead.get(), 0) < 0 || ::dup2(outWrite.get(), 1) < 0 || ::dup2(errWrite.get(), 2) < 0)
            childFail(fail, 1);
        sigset_t all;
        sigemptyset(&all);
        ::sigprocmask(SIG_SETMASK, &all, nullptr);
        for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);
        // Order as bubblewrap: no-new-privs, close fds, drop privileges, exec.
        ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        // CLOEXEC rather than close: the failure pipe must live until exec.
        ::syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
        if (::chdir(cwd.c_str()) != 0) childFail(fail, 2);
        if (user->uid != 0) {
            gid_t gid = user->gid;
            if (::setgroups(1, &gid) != 0 || ::setgid(user->gid) != 0 || ::setuid(user->uid) != 0)
                childFail(fail, 3);
        }
        ::execvpe(argv[0], argv.data(), envp.data());
        childFail(fail, 4);
    }
    pid_ = pid;
    failWrite.reset();
    ChildFailure failure{};
    ssize_t n;
    do {
        n = ::read(failRead.get(), &failure, sizeof failure);
    } while (n < 0 && errno == EINTR);
    if (n == sizeof failure) {
        ::waitpid(pid_, nullptr, 0);
        exited_ = true;
        pid_ = -1;
        result_.exit_code = failure.stage == 4 && failure.err == ENOENT ? 127 : 126;
        result_.error = std::string(stageName(failure.stage)) + ": " + std::strerror(failure.err);
        if (failure.stage == 2) result_.error += " (" + cwd + ")";
        if (failure.stage == 4) result_.error += " (" + request.argv[0] + ")";
        return;
    }
    stdin_ = std::move(inWrite);
    stdout_ = std::move(outRead);
    stderr_ = std::move(errRead);
    setNonBlocking(stdin_.get());
    setNonBlocking(stdout_.get());
    setNonBlocking(stderr_.get());
    stdinData_ = request.stdin_data;
    if (stdinData_.empty()) stdin_.reset();
    if (request.timeout_ms > 0) deadlineMs_ = nowMs() + static_cast<std::int64_t>(request.timeout_ms);
}

void ExecSession::addCredit(std::uint32_t c) {
    std::uint64_t sum = std::uint64_t(credit_) + c;
    credit_ = sum > 0xffffffffu ? 0xffffffffu : static_cast<std::uint32_t>(sum);
}

std::string ExecSession::readOutput(int fd, std::size_t max) {
    std::string buf(max, '\0');
    ssize_t n = ::read(fd, buf.data(), max);
    if (n > 0) {
        buf.resize(static_cast<std::size_t>(n));
        return buf;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        if (fd == stdout_.get()) stdout_.reset();
        if (fd == stderr_.get()) stderr_.reset();
    }
    return {};
}

void ExecSession::writeStdin() {
    while (stdin_.valid() && stdinOffset_ < stdinData_.size()) {
        ssize_t n = ::write(stdin_.get(), stdinData_.data() + stdinOffset_, stdinData_.size() - stdinOffset_);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) return;
            stdin_.reset();  // the child closed its stdin: drop the rest
            return;
        }
        stdinOffset_ += static_cast<std::size_t>(n);
    }
    stdin_.reset();
    stdinData_.clear();
}

void ExecSession::onExited(int status) {
    exited_ = true;
    exitedAtMs_ = nowMs();
    if (WIFEXITED(status)) {
        result_.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        result_.signal = WTERMSIG(status);
        result_.exit_code = 128 + WTERMSIG(status);
    }
    stdin_.reset();
    // Leftover members of the group would keep the pipes open: the command is over.
    killGroup();
}

void ExecSession::killGroup() {
    if (pid_ > 0 && !groupKilled_) {
        ::kill(-pid_, SIGKILL);
        groupKilled_ = true;
    }
}

void ExecSession::tick(std::int64_t now) {
    if (!exited_ && deadlineMs_ > 0 && now >= deadlineMs_) {
        result_.timed_out = true;
        killGroup();
    }
    if (exited_ && exitedAtMs_ > 0 && now - exitedAtMs_ > kPostExitGraceMs) {
        stdout_.reset();
        stderr_.reset();
    }
}

std::int64_t ExecSession::nextDeadlineMs() const {
    if (!exited_ && deadlineMs_ > 0) return deadlineMs_;
    if (exited_ && exitedAtMs_ > 0 && (stdout_.valid() || stderr_.valid())) return exitedAtMs_ + kPostExitGraceMs;
    return 0;
}

}  // namespace airlock::guest

#include "agent/Spawn.hpp"

#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "agent/UserDb.hpp"

namespace airlock::guest {
namespace {

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

bool makePipe(UniqueFd& readEnd, UniqueFd& writeEnd) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return false;
    readEnd.reset(fds[0]);
    writeEnd.reset(fds[1]);
    return true;
}

void setNonBlocking(int fd) {
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

Spawned failed(const std::string& why, int code = 126) {
    Spawned s;
    s.error = why;
    s.exitCode = code;
    return s;
}

}  // namespace

int signalFromName(const std::string& nameIn) {
    std::string name = nameIn;
    if (name.rfind("SIG", 0) == 0) name = name.substr(3);
    static const std::pair<const char*, int> table[] = {
        {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL}, {"USR1", SIGUSR1},
        {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"WINCH", SIGWINCH}};
    for (auto [n, s] : table)
        if (name == n) return s;
    if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos && name.size() < 3) {
        int n = std::stoi(name);
        return n > 0 && n < 65 ? n : 0;
    }
    return 0;
}

Spawned spawnProcess(const protocol::ExecRequest& request) {
    auto user = lookupUser(request.user);
    if (!user) return failed("unknown user '" + request.user + "'");

    std::vector<std::string> envStrings = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME=" + user->home, "USER=" + user->name, "LOGNAME=" + user->name,
        "SHELL=" + (user->shell.empty() ? std::string("/bin/sh") : user->shell), "LANG=C.UTF-8",
        "TERM=" + std::string(request.tty ? "xterm-256color" : "dumb")};
    for (const auto& [k, v] : request.env) {
        std::string prefix = k + "=";
        std::erase_if(envStrings, [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
        envStrings.push_back(prefix + v);
    }
    std::string cwd = request.cwd.empty() ? user->home : request.cwd;

    // Everything the child needs is built before fork: after fork only
    // async-signal-safe calls happen.
    std::vector<char*> argv, envp;
    for (const auto& a : request.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& e : envStrings) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);

    UniqueFd inRead, inWrite, outRead, outWrite, errRead, errWrite, failRead, failWrite, ptyMaster, ptySlave;
    if (!makePipe(failRead, failWrite)) return failed(std::string("pipe: ") + std::strerror(errno));
    if (request.tty) {
        int master = -1, slave = -1;
        winsize ws{static_cast<unsigned short>(request.rows), static_cast<unsigned short>(request.cols), 0, 0};
        if (::openpty(&master, &slave, nullptr, nullptr, &ws) != 0)
            return failed(std::string("openpty: ") + std::strerror(errno));
        ptyMaster.reset(master);
        ptySlave.reset(slave);
        ::fcntl(master, F_SETFD, FD_CLOEXEC);
        ::fcntl(slave, F_SETFD, FD_CLOEXEC);
    } else if (!makePipe(inRead, inWrite) || !makePipe(outRead, outWrite) || !makePipe(errRead, errWrite)) {
        return failed(std::string("pipe: ") + std::strerror(errno));
    }

    pid_t pid = ::fork();
    if (pid < 0) return failed(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        int fail = failWrite.get();
        ::setsid();  // own session and process group: a timeout or cancel kills the whole group
        if (request.tty) {
            if (::ioctl(ptySlave.get(), TIOCSCTTY, 0) != 0) childFail(fail, 1);
            if (::dup2(ptySlave.get(), 0) < 0 || ::dup2(ptySlave.get(), 1) < 0 || ::dup2(ptySlave.get(), 2) < 0)
                childFail(fail, 1);
        } else if (::dup2(inRead.get(), 0) < 0 || ::dup2(outWrite.get(), 1) < 0 || ::dup2(errWrite.get(), 2) < 0) {
            childFail(fail, 1);
        }
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);
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
    failWrite.reset();
    ptySlave.reset();
    ChildFailure failure{};
    ssize_t n;
    do {
        n = ::read(failRead.get(), &failure, sizeof failure);
    } while (n < 0 && errno == EINTR);
    if (n == sizeof failure) {
        ::waitpid(pid, nullptr, 0);
        std::string why = std::string(stageName(failure.stage)) + ": " + std::strerror(failure.err);
        if (failure.stage == 2) why += " (" + cwd + ")";
        if (failure.stage == 4) why += " (" + request.argv[0] + ")";
        return failed(why, failure.stage == 4 && failure.err == ENOENT ? 127 : 126);
    }
    Spawned s;
    s.pid = pid;
    if (request.tty) {
        s.stdoutFd.reset(::fcntl(ptyMaster.get(), F_DUPFD_CLOEXEC, 0));
        s.stdinFd = std::move(ptyMaster);
    } else {
        s.stdinFd = std::move(inWrite);
        s.stdoutFd = std::move(outRead);
        s.stderrFd = std::move(errRead);
    }
    setNonBlocking(s.stdinFd.get());
    setNonBlocking(s.stdoutFd.get());
    setNonBlocking(s.stderrFd.get());
    return s;
}

}  // namespace airlock::guest

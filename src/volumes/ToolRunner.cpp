#include "volumes/ToolRunner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <thread>

#include "core/Error.hpp"
#include "core/Log.hpp"
#include "core/UniqueFd.hpp"

namespace airlock {
namespace {

using ToolClock = std::chrono::steady_clock;

// The environment every tool gets: messages in English (they are parsed),
// no pager, and no libmagic guessing at file contents (debugfs stat).
const std::array<const char*, 6> kToolEnvironment = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                                                     "LC_ALL=C",
                                                     "LANG=C",
                                                     "DEBUGFS_PAGER=__none__",
                                                     "PAGER=__none__",
                                                     "E2FSPROGS_LIBMAGIC_SUPPRESS=1"};

// What the child writes to its status pipe when it fails before exec; a
// successful exec closes the pipe with nothing written.
struct ToolStartFailure {
    int stage = 0;
    int error = 0;
};
const std::array<const char*, 4> kToolStartStages = {"set up its descriptors", "set its limits",
                                                     "drop to its user", "exec"};

// Everything the child needs, built before fork: between fork and exec the
// child makes only async-signal-safe calls (the parent may have threads).
struct ToolChildPlan {
    std::vector<char*> argv, envp;
    std::vector<int> fds;    // fds[i] becomes descriptor i; the last is the status pipe
    std::vector<int> moved;  // scratch, one per fd
    int maxFd = 1024;        // for closing by loop when close_range is missing
    rlimit memory{}, cpu{}, fileSize{}, core{};
    bool drop = false;
    bool ownPidNamespace = false;
    uid_t uid = 0;
    gid_t gid = 0;
    pid_t parent = 0;
};

[[noreturn]] void toolChildFails(int statusFd, int stage) {
    ToolStartFailure failure{stage, errno};
    ssize_t ignored = ::write(statusFd, &failure, sizeof failure);
    (void)ignored;
    ::_exit(127);
}

[[noreturn]] void runToolChild(ToolChildPlan& plan) {
    struct sigaction byDefault {};
    byDefault.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &byDefault, nullptr);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);

    // Every source first moves above the targets, so that no dup2 clobbers
    // a source still to be placed.
    int count = static_cast<int>(plan.fds.size());
    int status = plan.fds.back();
    for (int i = 0; i < count; ++i) {
        plan.moved[static_cast<std::size_t>(i)] =
            ::fcntl(plan.fds[static_cast<std::size_t>(i)], F_DUPFD_CLOEXEC, count);
        if (plan.moved[static_cast<std::size_t>(i)] < 0) toolChildFails(status, 0);
    }
    status = plan.moved.back();
    for (int i = 0; i < count; ++i)
        if (::dup2(plan.moved[static_cast<std::size_t>(i)], i) < 0) toolChildFails(status, 0);
    status = count - 1;
    if (::fcntl(status, F_SETFD, FD_CLOEXEC) < 0) toolChildFails(status, 0);
    if (::close_range(static_cast<unsigned>(count), ~0U, 0) != 0)
        for (int fd = count; fd < plan.maxFd; ++fd) ::close(fd);
    if (::chdir("/") != 0) toolChildFails(status, 0);

    if (::setrlimit(RLIMIT_AS, &plan.memory) != 0 || ::setrlimit(RLIMIT_CPU, &plan.cpu) != 0 ||
        ::setrlimit(RLIMIT_FSIZE, &plan.fileSize) != 0 || ::setrlimit(RLIMIT_CORE, &plan.core) != 0)
        toolChildFails(status, 1);
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) toolChildFails(status, 1);
    // Raw system calls: glibc's wrappers would signal the parent's other
    // threads, which do not exist in this child.
    if (plan.drop) {
        if (::syscall(SYS_setgroups, 0, nullptr) != 0 ||
            ::syscall(SYS_setresgid, plan.gid, plan.gid, plan.gid) != 0 ||
            ::syscall(SYS_setresuid, plan.uid, plan.uid, plan.uid) != 0)
            toolChildFails(status, 2);
    }
    // After the uid change, which clears it; a parent gone already means no one
    // reaps. In a PID namespace of its own the parent is outside it (ppid 0).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (::getppid() != (plan.ownPidNamespace ? 0 : plan.parent)) ::_exit(127);
    ::execve(plan.argv[0], plan.argv.data(), plan.envp.data());
    toolChildFails(status, 3);
}

// The child, killed (SIGKILL, by its pid) and reaped on every way out.
class RunningTool {
  public:
    explicit RunningTool(pid_t pid) : pid_(pid) {}
    RunningTool(const RunningTool&) = delete;
    RunningTool& operator=(const RunningTool&) = delete;
    ~RunningTool() {
        kill();
        reap();
    }
    void kill() {
        if (!reaped_) ::kill(pid_, SIGKILL);
    }
    void reap() {
        while (!reaped_) {
            if (::waitpid(pid_, &status_, 0) == pid_) {
                reaped_ = true;
            } else if (errno != EINTR) {
                lost();
            }
        }
    }
    // Waits for it to exit until `deadline`; false when it is still running.
    bool reapBy(ToolClock::time_point deadline) {
        auto pause = std::chrono::milliseconds(1);
        while (!reaped_) {
            pid_t r = ::waitpid(pid_, &status_, WNOHANG);
            if (r == pid_) {
                reaped_ = true;
                break;
            }
            if (r < 0 && errno != EINTR) {
                lost();
                break;
            }
            if (ToolClock::now() >= deadline) return false;
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::milliseconds(20));
        }
        return true;
    }
    int status() const { return status_; }

  private:
    // Reaped by someone else (SIGCHLD ignored): neither exited nor signalled.
    void lost() {
        status_ = -1;
        reaped_ = true;
    }
    pid_t pid_;
    bool reaped_ = false;
    int status_ = 0;
};

std::string toolName(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

[[noreturn]] void toolFails(const std::string& what) {
    throw Error(ErrorCode::internal, what + ": " + std::strerror(errno));
}

void setNonBlocking(int fd) {
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) toolFails("fcntl");
}

}  // namespace

ToolRunner::ToolRunner(ToolUser user, std::chrono::milliseconds timeout,
                       std::uint64_t maxMemoryBytes)
    : user_(user), timeout_(timeout), maxMemoryBytes_(maxMemoryBytes) {}

std::string ToolRunner::locate(const std::string& name) {
    if (name.empty() || name.find('/') != std::string::npos)
        throw Error(ErrorCode::internal, "a tool's name, not a path: " + name);
    for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
        std::string path = dir + name;
        if (::access(path.c_str(), X_OK) == 0) return path;
    }
    throw Error(ErrorCode::unavailable, name + " is not installed (e2fsprogs)");
}

ToolResult ToolRunner::run(const ToolCommand& command) const {
    if (command.argv.empty() || command.argv[0].empty() || command.argv[0][0] != '/')
        throw Error(ErrorCode::internal, "a tool runs from its absolute path");
    const std::string name = toolName(command.argv[0]);

    // stdin: a socket rather than a pipe, so that a tool that exits without
    // reading it costs an EPIPE (MSG_NOSIGNAL), never a SIGPIPE here.
    UniqueFd inChild, inParent;
    if (command.input.empty()) {
        inChild.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        if (!inChild) toolFails("open /dev/null");
    } else {
        int pair[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
            toolFails("socketpair");
        inParent.reset(pair[0]);
        inChild.reset(pair[1]);
        ::shutdown(inChild.get(), SHUT_WR);
        setNonBlocking(inParent.get());
    }
    auto makePipe = [](UniqueFd& readEnd, UniqueFd& writeEnd) {
        int p[2];
        if (::pipe2(p, O_CLOEXEC) != 0) toolFails("pipe");
        readEnd.reset(p[0]);
        writeEnd.reset(p[1]);
    };
    UniqueFd outRead, outWrite, errRead, errWrite, statusRead, statusWrite;
    makePipe(outRead, outWrite);
    makePipe(errRead, errWrite);
    makePipe(statusRead, statusWrite);
    setNonBlocking(outRead.get());
    setNonBlocking(errRead.get());

    ToolChildPlan plan;
    std::vector<std::string> args = command.argv;
    for (auto& a : args) plan.argv.push_back(a.data());
    plan.argv.push_back(nullptr);
    for (const char* e : kToolEnvironment) plan.envp.push_back(const_cast<char*>(e));
    plan.envp.push_back(nullptr);
    plan.fds = {inChild.get(), outWrite.get(), errWrite.get()};
    for (int fd : command.fds) plan.fds.push_back(fd);
    plan.fds.push_back(statusWrite.get());
    plan.moved.assign(plan.fds.size(), -1);
    long openMax = ::sysconf(_SC_OPEN_MAX);
    plan.maxFd = openMax > 0 && openMax < (1 << 20) ? static_cast<int>(openMax) : (1 << 20);
    plan.memory = {maxMemoryBytes_, maxMemoryBytes_};
    rlim_t cpuSeconds = static_cast<rlim_t>((timeout_.count() + 999) / 1000 + 1);
    plan.cpu = {cpuSeconds, cpuSeconds + 1};
    plan.fileSize = {command.maxFileBytes, command.maxFileBytes};
    plan.core = {0, 0};
    plan.drop = user_.set && ::geteuid() == 0;
    plan.uid = user_.uid;
    plan.gid = user_.gid;
    plan.parent = ::getpid();

    // No signal handler may run in the child before it resets them.
    sigset_t all, previous;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &previous);
    // A dropped tool is pid 1 of a PID namespace of its own: whatever a
    // hijacked tool starts dies with it, and it sees (and signals) no process
    // outside, such as a QEMU another airlockd runs under the same uid.
    plan.ownPidNamespace = plan.drop;
    pid_t pid = plan.ownPidNamespace
                    ? static_cast<pid_t>(::syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, nullptr,
                                                   nullptr, nullptr, nullptr))
                    : ::fork();
    if (pid == 0) runToolChild(plan);
    int forkError = errno;
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    if (pid < 0) {
        errno = forkError;
        toolFails("fork for " + name);
    }
    RunningTool child(pid);
    inChild.reset();
    outWrite.reset();
    errWrite.reset();
    statusWrite.reset();

    ToolStartFailure failure;
    ssize_t got;
    do {
        got = ::read(statusRead.get(), &failure, sizeof failure);
    } while (got < 0 && errno == EINTR);
    if (got == static_cast<ssize_t>(sizeof failure)) {
        child.reap();
        std::size_t stage = std::min<std::size_t>(
            static_cast<std::size_t>(std::max(failure.stage, 0)), kToolStartStages.size() - 1);
        throw Error(ErrorCode::internal, "cannot start " + name + ": it could not " +
                                             kToolStartStages[stage] + ": " +
                                             std::strerror(failure.error));
    }
    statusRead.reset();
    if (command.onStart) command.onStart(pid);

    ToolResult result;
    const auto deadline = ToolClock::now() + timeout_;
    auto timedOut = [&]() -> Error {
        child.kill();
        child.reap();
        logWarn("volumes",
                name + " was killed: it ran past its " + std::to_string(timeout_.count()) + " ms");
        return Error(ErrorCode::unavailable,
                     name + " did not finish within " + std::to_string(timeout_.count()) + " ms");
    };
    std::size_t inputAt = 0;
    bool outOpen = true, errOpen = true;
    std::vector<char> buffer(64 * 1024);
    while ((outOpen || errOpen) && !result.stopped) {
        auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - ToolClock::now());
        if (left.count() <= 0) throw timedOut();
        std::array<pollfd, 3> polled{};
        nfds_t count = 0;
        int inAt = -1, outAt = -1, errAt = -1;
        if (inParent) {
            inAt = static_cast<int>(count);
            polled[count++] = {inParent.get(), POLLOUT, 0};
        }
        if (outOpen) {
            outAt = static_cast<int>(count);
            polled[count++] = {outRead.get(), POLLIN, 0};
        }
        if (errOpen) {
            errAt = static_cast<int>(count);
            polled[count++] = {errRead.get(), POLLIN, 0};
        }
        int ready = ::poll(polled.data(), count,
                           static_cast<int>(std::min<long long>(left.count(), 60000)));
        if (ready < 0) {
            if (errno == EINTR) continue;
            toolFails("poll");
        }
        if (ready == 0) continue;
        if (inAt >= 0 && polled[static_cast<std::size_t>(inAt)].revents != 0) {
            std::size_t chunk = std::min<std::size_t>(command.input.size() - inputAt, 64 * 1024);
            ssize_t sent = ::send(inParent.get(), command.input.data() + inputAt, chunk,
                                  MSG_NOSIGNAL | MSG_DONTWAIT);
            if (sent > 0) inputAt += static_cast<std::size_t>(sent);
            // All sent: the end of its input. Refused: it stopped reading.
            if (inputAt == command.input.size() || (sent < 0 && errno != EAGAIN && errno != EINTR))
                inParent.reset();
        }
        if (outAt >= 0 && polled[static_cast<std::size_t>(outAt)].revents != 0) {
            ssize_t n = ::read(outRead.get(), buffer.data(), buffer.size());
            if (n > 0) {
                std::string_view chunk(buffer.data(), static_cast<std::size_t>(n));
                if (command.onOutput) {
                    if (!command.onOutput(chunk)) result.stopped = true;
                } else if (result.output.size() + chunk.size() > command.maxOutputBytes) {
                    result.stopped = true;
                } else {
                    result.output.append(chunk);
                }
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                outOpen = false;
            }
        }
        if (errAt >= 0 && polled[static_cast<std::size_t>(errAt)].revents != 0) {
            ssize_t n = ::read(errRead.get(), buffer.data(), buffer.size());
            if (n > 0) {
                // Past the bound it is drained and dropped: a tool spewing
                // errors about a hostile image must not block on its pipe.
                std::size_t keep = std::min<std::size_t>(
                    static_cast<std::size_t>(n),
                    kMaxErrorBytes - std::min(kMaxErrorBytes, result.errors.size()));
                result.errors.append(buffer.data(), keep);
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                errOpen = false;
            }
        }
    }
    if (result.stopped) {
        child.kill();
        child.reap();
    } else if (!child.reapBy(deadline)) {
        throw timedOut();
    }
    int status = child.status();
    if (WIFEXITED(status)) {
        result.exitCode = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        result.signal = WTERMSIG(status);
    }
    return result;
}

}  // namespace airlock

#include "GuestInit.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace airlock::init {

// ---------------------------------------------------------------- Fd

Fd::~Fd() { reset(); }

Fd::Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

Fd& Fd::operator=(Fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
}

void Fd::reset(int fd) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
}

// ---------------------------------------------------------------- helpers

namespace {

constexpr std::string_view kPrefix = "airlock-init: ";

// The signals PID 1 refuses to die from. The kernel already drops signals
// without a handler sent to init, but SIG_IGN makes that explicit and also
// covers the console's Ctrl-C / hangup when someone attaches to it.
constexpr int kIgnoredSignals[] = {SIGINT, SIGTERM, SIGHUP};

bool writeAll(int fd, std::string_view data) {
    while (!data.empty()) {
        ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
}

bool makeDir(const char* path, mode_t mode) {
    if (::mkdir(path, mode) == 0) return true;
    return errno == EEXIST;
}

std::string describeStatus(int status) {
    if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) {
        const char* name = ::sigabbrev_np(WTERMSIG(status));
        std::string s = "killed by signal " + std::to_string(WTERMSIG(status));
        if (name != nullptr) s += std::string(" (SIG") + name + ")";
        if (WCOREDUMP(status)) s += ", core dumped";
        return s;
    }
    return "ended with raw status " + std::to_string(status);
}

std::string_view trim(std::string_view s) {
    constexpr std::string_view ws = " \t\r\n";
    auto first = s.find_first_not_of(ws);
    if (first == std::string_view::npos) return {};
    auto last = s.find_last_not_of(ws);
    return s.substr(first, last - first + 1);
}

// Reads a whole small file; std::ifstream would drag iostreams into a
// static binary for no benefit.
bool readFile(const std::string& path, std::string& out, int& err) {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
        err = errno;
        return false;
    }
    out.clear();
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n == 0) return true;
        if (n < 0) {
            if (errno == EINTR) continue;
            err = errno;
            return false;
        }
        out.append(buf, static_cast<size_t>(n));
    }
}

timespec toTimespec(std::chrono::nanoseconds d) {
    if (d < std::chrono::nanoseconds::zero()) d = std::chrono::nanoseconds::zero();
    auto secs = std::chrono::duration_cast<std::chrono::seconds>(d);
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(secs.count());
    ts.tv_nsec = static_cast<long>((d - secs).count());
    return ts;
}

long long toMs(std::chrono::steady_clock::duration d) {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

}  // namespace

// ---------------------------------------------------------------- GuestInit

GuestInit::GuestInit(InitConfig config)
    : config_(std::move(config)), backoff_(config_.backoffInitial) {}

void GuestInit::log(std::string_view message) const {
    std::string line;
    line.reserve(kPrefix.size() + message.size() + 1);
    line.append(kPrefix).append(message).push_back('\n');
    // Reopened per line: before devtmpfs is mounted only the kernel's
    // built-in /dev/console exists, afterwards the devtmpfs one does.
    // O_NOCTTY keeps PID 1 from acquiring the console as controlling tty,
    // which would let a console hangup reach it.
    Fd console(::open(config_.console.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC));
    writeAll(console ? console.get() : STDERR_FILENO, line);
}

void GuestInit::logErrno(std::string_view what, int err) const {
    std::string msg(what);
    msg += ": ";
    msg += std::strerror(err);
    log(msg);
}

void GuestInit::run() {
    if (::getpid() != 1) log("warning: not running as PID 1");
    ignoreTerminationSignals();
    mountFilesystems();
    setHostname();
    loadModules();
    tunePageReporting();
    switchRootIfAsked();
    configureLoopback();
    setEnvironment();
    superviseForever();
}

void GuestInit::ignoreTerminationSignals() {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    for (int sig : kIgnoredSignals) ::sigaction(sig, &ign, nullptr);

    // SIGCHLD needs a real handler: with SIG_IGN the kernel auto-reaps and
    // we would lose the agent's exit status; with SIG_DFL a blocked SIGCHLD
    // is still queued, but a handler removes any doubt. It never runs
    // because SIGCHLD stays blocked and is consumed by sigtimedwait().
    struct sigaction chld {};
    chld.sa_handler = [](int) {};
    sigemptyset(&chld.sa_mask);
    chld.sa_flags = SA_NOCLDSTOP | SA_RESTART;
    ::sigaction(SIGCHLD, &chld, nullptr);

    // Blocked before the first fork so no child exit can slip in between
    // reaping and waiting.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &set, nullptr);
}

void GuestInit::mountOne(const char* source, const char* target, const char* type,
                         unsigned long flags, const char* data, mode_t dirMode) {
    if (!makeDir(target, dirMode)) {
        logErrno(std::string("mkdir ") + target, errno);
        return;
    }
    if (::mount(source, target, type, flags, data) != 0) {
        // EBUSY: already mounted (e.g. the kernel auto-mounted devtmpfs);
        // the filesystem is there, which is all we need.
        if (errno == EBUSY) return;
        logErrno(std::string("mount ") + type + " on " + target, errno);
    }
}

void GuestInit::mountFilesystems() {
    constexpr unsigned long kSafe = MS_NOSUID | MS_NODEV;
    mountOne("proc", "/proc", "proc", kSafe | MS_NOEXEC, nullptr, 0555);
    mountOne("sysfs", "/sys", "sysfs", kSafe | MS_NOEXEC, nullptr, 0555);
    mountOne("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755", 0755);
    // gid 5 is the conventional tty group; ptmxmode=666 lets the
    // unprivileged sandbox user allocate its own PTYs.
    mountOne("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "gid=5,mode=0620,ptmxmode=0666",
             0755);
    // POSIX shared memory (Python multiprocessing, Chromium, ...) needs it.
    mountOne("tmpfs", "/dev/shm", "tmpfs", kSafe, "mode=1777", 01777);
    mountOne("tmpfs", "/tmp", "tmpfs", kSafe, "mode=1777", 01777);
    mountOne("tmpfs", "/run", "tmpfs", kSafe, "mode=0755", 0755);

    // devtmpfs does not provide these; bash process substitution and many
    // scripts rely on /dev/fd and /dev/std*.
    const std::pair<const char*, const char*> links[] = {
        {"/proc/self/fd", "/dev/fd"},
        {"/proc/self/fd/0", "/dev/stdin"},
        {"/proc/self/fd/1", "/dev/stdout"},
        {"/proc/self/fd/2", "/dev/stderr"},
    };
    for (const auto& [target, link] : links) {
        if (::symlink(target, link) != 0 && errno != EEXIST)
            logErrno(std::string("symlink ") + link, errno);
    }
}

bool GuestInit::copyFile(const std::string& from, const std::string& to, mode_t mode) const {
    std::string data;
    int err = 0;
    if (!readFile(from, data, err)) {
        logErrno("read " + from, err);
        return false;
    }
    Fd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
    if (!out || !writeAll(out.get(), data)) {
        logErrno("write " + to, errno);
        return false;
    }
    return true;
}

void GuestInit::switchRootIfAsked() {
    std::string cmdline;
    int err = 0;
    if (!readFile("/proc/cmdline", cmdline, err)) return;
    constexpr std::string_view kKey = "airlock.root=";
    auto pos = cmdline.find(kKey);
    if (pos == std::string::npos) return;
    auto end = cmdline.find_first_of(" \n", pos);
    std::string device =
        cmdline.substr(pos + kKey.size(), end == std::string::npos ? end : end - pos - kKey.size());
    // virtio_blk probes asynchronously: wait for the node (bounded).
    for (int i = 0; i < 500 && ::access(device.c_str(), F_OK) != 0; ++i) ::usleep(10'000);
    if (!makeDir("/newroot", 0755) ||
        ::mount(device.c_str(), "/newroot", "ext4", MS_NOATIME, nullptr) != 0) {
        logErrno("mount root " + device, errno);
        return;  // the initramfs stays root: the agent still answers and reports
    }
    growFilesystem(device, "/newroot");
    // The agent comes from the initramfs, so the disk image never has to
    // match the agent's version; /run moves over with the other mounts.
    std::string carried = "/run/airlock-agent";
    if (copyFile(config_.agentPath, carried, 0755)) config_.agentPath = carried;
    for (const char* m : {"/dev", "/proc", "/sys", "/run"}) {
        std::string target = std::string("/newroot") + m;
        makeDir(target.c_str(), 0755);
        if (::mount(m, target.c_str(), nullptr, MS_MOVE, nullptr) != 0)
            logErrno(std::string("move ") + m, errno);
    }
    if (::chdir("/newroot") != 0 || ::mount(".", "/", nullptr, MS_MOVE, nullptr) != 0 ||
        ::chroot(".") != 0 || ::chdir("/") != 0) {
        logErrno("switch root", errno);
        return;
    }
    // The disk's /tmp is a plain directory: a tmpfs as in the minimal image.
    mountOne("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", 01777);
    log("root is " + device);
}

// The disk's virtual size is the sandbox's disk_gib, which may be larger
// than the image's ext4: grow the filesystem online to fill it (the kernel
// does it; the initramfs has no resize2fs). Writes beyond it get ENOSPC here
// in the guest; the host's overlay never grows past the virtual size.
void GuestInit::growFilesystem(const std::string& device, const char* mountPoint) {
    // From <linux/fs.h> and the kernel's ext4.h (the first clashes with
    // <sys/mount.h>, the second is not exported).
    constexpr unsigned long kBlkGetSize64 = _IOR(0x12, 114, std::size_t);
    constexpr unsigned long kExt4ResizeFs = _IOW('f', 16, std::uint64_t);
    Fd dev(::open(device.c_str(), O_RDONLY | O_CLOEXEC));
    std::uint64_t bytes = 0;
    if (!dev.valid() || ::ioctl(dev.get(), kBlkGetSize64, &bytes) != 0) {
        logErrno("size of " + device, errno);
        return;
    }
    struct statfs st {};
    if (::statfs(mountPoint, &st) != 0 || st.f_bsize <= 0) {
        logErrno("statfs root", errno);
        return;
    }
    std::uint64_t blocks = bytes / static_cast<std::uint64_t>(st.f_bsize);
    Fd dir(::open(mountPoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    // Equal to the current size: the kernel has nothing to do.
    if (!dir.valid() || ::ioctl(dir.get(), kExt4ResizeFs, &blocks) != 0)
        logErrno("grow the root filesystem", errno);
}

void GuestInit::setHostname() {
    if (::sethostname(config_.hostname.data(), config_.hostname.size()) != 0)
        logErrno("sethostname", errno);
}

void GuestInit::loadModules() {
    std::string list;
    int err = 0;
    if (!readFile(config_.moduleList, list, err)) {
        // An image may legitimately have every driver built in.
        if (err != ENOENT) logErrno("read " + config_.moduleList, err);
        return;
    }

    int loaded = 0, present = 0, failed = 0;
    std::string_view rest(list);
    while (!rest.empty()) {
        auto nl = rest.find('\n');
        std::string_view line = trim(rest.substr(0, nl));
        rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
        if (line.empty() || line.front() == '#') continue;

        std::string path =
            line.front() == '/' ? std::string(line) : config_.moduleDir + "/" + std::string(line);
        Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        if (!fd) {
            logErrno("open module " + path, errno);
            ++failed;
            continue;
        }
        // finit_module lets the kernel read (and verify the signature of)
        // the file itself; there is no kmod/modprobe in the image.
        if (::syscall(SYS_finit_module, fd.get(), "", 0) != 0) {
            if (errno == EEXIST) {
                ++present;
                continue;
            }
            // Keep going: one broken optional driver (vsock on a host
            // without vhost-vsock) must not cost us the agent channel.
            logErrno("load module " + path, errno);
            ++failed;
            continue;
        }
        ++loaded;
    }
    log("modules: " + std::to_string(loaded) + " loaded, " + std::to_string(present) +
        " already present, " + std::to_string(failed) + " failed");
}

void GuestInit::tunePageReporting() {
    // After the balloon driver registered: in this kernel (6.1) registering
    // resets the order, so a kernel command line value would be lost.
    Fd param(::open(config_.pageReportingOrderParam.c_str(), O_WRONLY | O_CLOEXEC));
    if (!param) {
        // A kernel without free page reporting.
        if (errno != ENOENT) logErrno("open " + config_.pageReportingOrderParam, errno);
        return;
    }
    if (!writeAll(param.get(), config_.pageReportingOrder))
        logErrno("write " + config_.pageReportingOrderParam, errno);
}

void GuestInit::configureLoopback() {
    Fd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!sock) {
        logErrno("socket for lo", errno);
        return;
    }

    auto setAddr = [&](unsigned long request, const char* name, in_addr_t addr) {
        ifreq ifr{};
        std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
        sockaddr_in sin{};
        sin.sin_family = AF_INET;
        sin.sin_addr.s_addr = htonl(addr);
        // memcpy: ifr_addr is a generic sockaddr, and type-punning through
        // a pointer cast would break strict aliasing.
        std::memcpy(&ifr.ifr_addr, &sin, sizeof sin);
        if (::ioctl(sock.get(), request, &ifr) != 0) {
            logErrno(std::string("lo ") + name, errno);
            return false;
        }
        return true;
    };
    setAddr(SIOCSIFADDR, "SIOCSIFADDR", INADDR_LOOPBACK);
    setAddr(SIOCSIFNETMASK, "SIOCSIFNETMASK", 0xff000000u);

    ifreq ifr{};
    std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    if (::ioctl(sock.get(), SIOCGIFFLAGS, &ifr) != 0) {
        logErrno("lo SIOCGIFFLAGS", errno);
        return;
    }
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
    if (::ioctl(sock.get(), SIOCSIFFLAGS, &ifr) != 0) logErrno("lo SIOCSIFFLAGS", errno);
}

void GuestInit::setEnvironment() {
    ::setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin", 1);
    ::setenv("HOME", "/root", 1);
}

void GuestInit::startAgent() {
    // Everything the child needs is prepared before fork.
    const char* path = config_.agentPath.c_str();
    char* const argv[] = {const_cast<char*>(path), nullptr};

    pid_t pid = ::fork();
    if (pid < 0) {
        logErrno("fork", errno);
        nextStartAt_ = Clock::now() + backoff_;
        backoff_ = std::min(backoff_ * 2, config_.backoffMax);
        return;
    }
    if (pid == 0) {
        // The agent must not inherit PID 1's immunity: SIG_IGN survives
        // exec, and so does the blocked SIGCHLD, which would break its own
        // child handling.
        struct sigaction dfl {};
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        for (int sig = 1; sig < NSIG; ++sig) {
            if (sig == SIGKILL || sig == SIGSTOP) continue;
            ::sigaction(sig, &dfl, nullptr);  // EINVAL for libc-reserved ones is fine.
        }
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);

        // Own session: the agent manages process groups of its children
        // and must not share one with PID 1.
        ::setsid();

        int in = ::open("/dev/null", O_RDONLY | O_NOCTTY);
        int out = ::open(config_.console.c_str(), O_WRONLY | O_NOCTTY);
        if (in >= 0) ::dup2(in, STDIN_FILENO);
        if (out >= 0) {
            ::dup2(out, STDOUT_FILENO);
            ::dup2(out, STDERR_FILENO);
        }
        if (in > STDERR_FILENO) ::close(in);
        if (out > STDERR_FILENO) ::close(out);

        ::execv(path, argv);
        // Single-threaded parent, so non-async-signal-safe calls are fine here.
        logErrno(std::string("exec ") + path, errno);
        ::_exit(127);
    }

    agentPid_ = pid;
    agentStartedAt_ = Clock::now();
    log("started " + config_.agentPath + " (pid " + std::to_string(pid) + ")");
}

void GuestInit::onAgentExit(int status) {
    auto now = Clock::now();
    auto uptime = now - agentStartedAt_;
    if (uptime >= config_.healthyAfter) backoff_ = config_.backoffInitial;

    log(config_.agentPath + " (pid " + std::to_string(agentPid_) + ") " + describeStatus(status) +
        " after " + std::to_string(toMs(uptime)) + " ms; restarting in " +
        std::to_string(backoff_.count()) + " ms");

    agentPid_ = -1;
    nextStartAt_ = now + backoff_;
    backoff_ = std::min(backoff_ * 2, config_.backoffMax);
}

void GuestInit::reapChildren() {
    // Every orphan in the guest is reparented to us; unreaped they would
    // pile up as zombies and eventually exhaust the PID space.
    for (;;) {
        int status = 0;
        pid_t pid = ::waitpid(-1, &status, WNOHANG);
        if (pid <= 0) {
            if (pid < 0 && errno == EINTR) continue;
            return;  // 0: children left but none exited; ECHILD: none at all.
        }
        if (pid == agentPid_) onAgentExit(status);
    }
}

void GuestInit::superviseForever() {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);

    // A periodic wake-up costs nothing and guards against a missed SIGCHLD
    // ever leaving a zombie or a dead agent behind.
    constexpr std::chrono::seconds kSafetyPoll{5};

    nextStartAt_ = Clock::now();
    for (;;) {
        reapChildren();

        auto now = Clock::now();
        if (agentPid_ < 0 && now >= nextStartAt_) {
            startAgent();
            continue;
        }

        std::chrono::nanoseconds wait = kSafetyPoll;
        if (agentPid_ < 0) wait = std::min<std::chrono::nanoseconds>(wait, nextStartAt_ - now);
        timespec ts = toTimespec(wait);
        // Returns on SIGCHLD, timeout (EAGAIN) or EINTR; all mean "look again".
        ::sigtimedwait(&chld, nullptr, &ts);
    }
}

}  // namespace airlock::init

// PID 1 of an Airlock guest: prepares the minimal system and keeps
// airlock-agent alive. Statically linked, libc/STL only, because the
// initramfs has no shared libraries.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>

namespace airlock::init {

// Owns one file descriptor, so early-return error paths cannot leak it
// into the agent (which inherits everything not CLOEXEC).
class Fd {
  public:
    Fd() = default;
    explicit Fd(int fd) noexcept : fd_(fd) {}
    ~Fd();
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    Fd(Fd&& other) noexcept;
    Fd& operator=(Fd&& other) noexcept;

    [[nodiscard]] int get() const noexcept { return fd_; }
    [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
    explicit operator bool() const noexcept { return valid(); }
    void reset(int fd = -1) noexcept;

  private:
    int fd_ = -1;
};

struct InitConfig {
    std::string agentPath = "/sbin/airlock-agent";
    std::string moduleList = "/etc/airlock/modules";
    std::string moduleDir = "/lib/modules";
    std::string hostname = "airlock";
    std::string console = "/dev/console";
    // Free page reporting hands freed guest memory back to the host, by
    // default only in 2 MiB blocks, which an idle guest's scattered free
    // memory rarely forms (about 25 MiB more stays resident). 5: 128 KiB.
    std::string pageReportingOrderParam = "/sys/module/page_reporting/parameters/page_reporting_order";
    std::string pageReportingOrder = "5";
    std::chrono::milliseconds backoffInitial{200};
    std::chrono::milliseconds backoffMax{2000};
    // An agent that survived this long is considered healthy again, so a
    // later crash restarts quickly instead of inheriting an old penalty.
    std::chrono::milliseconds healthyAfter{10000};
};

class GuestInit {
  public:
    explicit GuestInit(InitConfig config = {});

    // Never returns: PID 1 exiting makes the kernel panic.
    [[noreturn]] void run();

  private:
    using Clock = std::chrono::steady_clock;

    void log(std::string_view message) const;
    void logErrno(std::string_view what, int err) const;

    void ignoreTerminationSignals();
    void mountFilesystems();
    void mountOne(const char* source, const char* target, const char* type, unsigned long flags,
                  const char* data, mode_t dirMode);
    // With airlock.root=DEV on the kernel command line (the debian template):
    // mounts DEV, carries the agent over in /run and makes DEV the root.
    void switchRootIfAsked();
    void growFilesystem(const std::string& device, const char* mountPoint);
    bool copyFile(const std::string& from, const std::string& to, mode_t mode) const;
    void setHostname();
    void loadModules();
    void tunePageReporting();
    void configureLoopback();
    void setEnvironment();

    void startAgent();
    void reapChildren();
    void onAgentExit(int status);
    [[noreturn]] void superviseForever();

    InitConfig config_;
    pid_t agentPid_ = -1;
    Clock::time_point agentStartedAt_{};
    Clock::time_point nextStartAt_{};
    std::chrono::milliseconds backoff_;
};

}  // namespace airlock::init

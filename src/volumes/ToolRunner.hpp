#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace airlock {

// Who a tool runs as. Set, and only when this process is root, the child
// drops to uid:gid (no supplementary groups) before exec.
struct ToolUser {
    unsigned uid = 0, gid = 0;
    bool set = false;
};

struct ToolCommand {
    std::vector<std::string> argv;   // argv[0]: the program's absolute path
    std::string input;               // written to the tool's stdin; "" gives it /dev/null
    std::vector<int> fds;            // become fds 3, 4, ... in the child (the rest are closed)
    std::uint64_t maxFileBytes = 0;  // RLIMIT_FSIZE: the furthest the tool may write into a file
    std::size_t maxOutputBytes = 1 << 20;  // stdout kept; more stops the tool (ToolResult::stopped)
    // Streams stdout instead of keeping it; returning false stops the tool.
    std::function<bool(std::string_view)> onOutput;
    std::function<void(pid_t)> onStart;  // the child's pid, once it runs (tests)
};

struct ToolResult {
    int exitCode = -1;     // -1 when a signal ended it
    int signal = 0;        // the signal that ended it
    bool stopped = false;  // killed here: output over its bound, or onOutput said stop
    std::string output;    // stdout, unless streamed
    std::string errors;    // stderr, its first kMaxErrorBytes
};

// Runs one program (fork + execve, an explicit argv and environment, no
// shell) with a deadline: on timeout the child is SIGKILLed by its pid and
// reaped, and run() throws Error(unavailable). Every path reaps the child.
// The child gets only stdin, stdout, stderr and ToolCommand::fds, the root
// directory as its working directory, no core dumps, no new privileges, and
// RLIMIT_AS / RLIMIT_CPU / RLIMIT_FSIZE bounds: what it reads may be hostile.
// Its environment is fixed (C locale, no pager), so its messages can be parsed.
// A tool that drops to a user runs as pid 1 of a PID namespace of its own:
// whatever it starts ends with it, and it cannot see or signal the host's.
class ToolRunner {
  public:
    static constexpr std::size_t kMaxErrorBytes = 64 * 1024;

    explicit ToolRunner(ToolUser user = {},
                        std::chrono::milliseconds timeout = std::chrono::seconds(60),
                        std::uint64_t maxMemoryBytes = std::uint64_t(4) << 30);

    // Throws Error(internal) when the program cannot start, Error(unavailable)
    // on timeout; a tool that exits non-zero is a result, not an error.
    ToolResult run(const ToolCommand& command) const;

    // The absolute path of an e2fsprogs tool (sbin first); Error(unavailable)
    // when it is not installed.
    static std::string locate(const std::string& name);

    std::chrono::milliseconds timeout() const { return timeout_; }

  private:
    ToolUser user_;
    std::chrono::milliseconds timeout_;
    std::uint64_t maxMemoryBytes_;
};

}  // namespace airlock

#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace airlock::cli {

struct StreamExecOptions {
    std::vector<std::string> argv;
    bool tty = false;          // a pseudo-terminal in the guest; raw mode locally when stdin is a terminal
    bool interactive = false;  // forward local stdin (always on with tty)
    // Where output goes as it arrives: channel 1 stdout, 2 stderr.
    std::function<void(int channel, const char* data, std::size_t size)> output;
};

// `airlock exec` over the WebSocket endpoint: output is written as it
// arrives, local stdin is forwarded, the terminal size follows SIGWINCH.
// Returns the command's exit code (128+N for a signal); throws
// std::runtime_error with the server's message on failure.
int runStreamExec(const std::string& baseUrl, const std::string& apiKey, const std::string& sandboxId,
                  const StreamExecOptions& options);

}  // namespace airlock::cli

#pragma once
#include <chrono>
#include <functional>
#include <string>

#include "core/Error.hpp"

namespace airlock::test {

// A fresh directory under /tmp, removed by the destructor. Mode 0755 so the
// unprivileged QEMU user can traverse it in VM tests.
class TempDir {
  public:
    TempDir();
    ~TempDir();
    const std::string& path() const { return path_; }

  private:
    std::string path_;
};

// Polls `condition` until it holds or `timeout` passes; no sleep-and-hope.
bool waitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
             std::chrono::milliseconds interval = std::chrono::milliseconds(50));

// Number of running qemu-system processes whose command line mentions `needle`.
int countQemuProcesses(const std::string& needle);

bool templatesBuilt();

// What a shell command printed on its standard output ("" when it could not
// start), whole or without its trailing line breaks.
std::string commandOutput(const std::string& command);
std::string commandLine(const std::string& command);

// Whether something accepts connections on 127.0.0.1:port.
bool loopbackPortOpen(int port);

// The ErrorCode `f` throws; records a test failure when it throws none.
ErrorCode codeOf(const std::function<void()>& f);

}  // namespace airlock::test

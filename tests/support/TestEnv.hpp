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

// A loopback TCP port nothing listens on now.
int freePort();

bool templatesBuilt();

// What a shell command printed on its standard output ("" when it could not
// start), whole or without its trailing line breaks.
std::string commandOutput(const std::string& command);
// The host's npm registry as scripts/package-upstreams derives it
// ("npm=URL", a --package-upstream value); "" when the host has none.
std::string hostNpmUpstream();
std::string commandLine(const std::string& command);

// libvirt probes QEMU's capabilities into each new driver root, over a
// second under TCG. A test's data directory starts from the answer of the
// last probe (kept in the build tree) and gives its own back; libvirt
// checks a cached answer against QEMU's and its own binaries and probes
// again when either changed, so the copy never changes a result.
void seedHypervisorCache(const std::string& dataDir);
void keepHypervisorCache(const std::string& dataDir);

// Whether something accepts connections on 127.0.0.1:port.
bool loopbackPortOpen(int port);

// The ErrorCode `f` throws; records a test failure when it throws none.
ErrorCode codeOf(const std::function<void()>& f);

}  // namespace airlock::test

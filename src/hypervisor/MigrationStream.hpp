#pragma once
#include <chrono>
#include <cstdint>
#include <string>

#include "core/UniqueFd.hpp"

namespace airlock {

// The host end of QEMU's migration stream over a unix socket: QEMU's exec:
// URIs are killed by libvirt's seccomp sandbox (spawn=deny), so the
// controller carries the bytes between the socket and the state file.
class MigrationStream {
public:
    // A listening socket at path that the QEMU user can connect to.
    static UniqueFd listenAt(const std::string& path);
    // Accepts one connection on listener and copies it to statePath until
    // EOF; returns the bytes written. Throws on timeout or I/O error.
    static std::uint64_t receiveToFile(int listener, const std::string& statePath,
                                       std::chrono::milliseconds timeout);
    // Connects to path and hangs up at once: ends a receiveToFile that waits.
    static void wake(const std::string& path) noexcept;
    // Connects to the socket QEMU listens on (retrying until it exists) and
    // sends the whole state file.
    static std::uint64_t sendFile(const std::string& socketPath, const std::string& statePath,
                                  std::chrono::milliseconds timeout);
};

}  // namespace airlock

#pragma once
#include <cstdint>
#include <string>

namespace airlock::fleet {

// The host's own figures a node reports: its CPUs, its memory and the
// memory the kernel says it can still give (MemAvailable).
struct HostCapacity {
    unsigned cpus = 0;
    std::uint64_t memoryMib = 0;
    std::uint64_t availableMib = 0;

    static HostCapacity read();
    // From a /proc/meminfo text (0s when a line is missing).
    static HostCapacity fromMeminfo(const std::string& meminfo, unsigned cpus);
};

}  // namespace airlock::fleet

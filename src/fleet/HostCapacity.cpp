#include "fleet/HostCapacity.hpp"

#include <fstream>
#include <sstream>
#include <thread>

namespace airlock::fleet {

HostCapacity HostCapacity::fromMeminfo(const std::string& meminfo, unsigned cpus) {
    HostCapacity c;
    c.cpus = cpus;
    std::istringstream in(meminfo);
    std::string name;
    std::uint64_t kib = 0;
    std::string unit;
    while (in >> name >> kib) {
        std::getline(in, unit);
        if (name == "MemTotal:") c.memoryMib = kib / 1024;
        if (name == "MemAvailable:") c.availableMib = kib / 1024;
    }
    return c;
}

HostCapacity HostCapacity::read() {
    std::ifstream in("/proc/meminfo");
    std::stringstream text;
    text << in.rdbuf();
    return fromMeminfo(text.str(), std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace airlock::fleet

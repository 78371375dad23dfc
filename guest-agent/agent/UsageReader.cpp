#include "agent/UsageReader.hpp"

#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace airlock::guest {

std::string UsageReader::read(protocol::GuestUsage& out) const {
    out = {};
    long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    out.cpuCount = cpus > 0 ? static_cast<std::uint32_t>(cpus) : 1;

    // "cpu  user nice system idle iowait irq softirq steal guest guest_nice":
    // guest time is inside user already, so it is not added again.
    std::ifstream stat(procRoot_ + "/stat");
    std::string label;
    if (!(stat >> label) || label != "cpu") return "no cpu line in " + procRoot_ + "/stat";
    std::uint64_t v[8] = {};
    for (int i = 0; i < 8; ++i)
        if (!(stat >> v[i])) {
            if (i < 4) return "a short cpu line in " + procRoot_ + "/stat";
            break;
        }
    for (auto x : v) out.cpuTicks += x;
    out.idleTicks = v[3] + v[4];

    std::ifstream meminfo(procRoot_ + "/meminfo");
    std::string line;
    bool total = false, available = false;
    while (std::getline(meminfo, line)) {
        std::istringstream in(line);
        std::string key;
        std::uint64_t kib = 0;
        if (!(in >> key >> kib)) continue;
        if (key == "MemTotal:") out.memTotal = kib * 1024, total = true;
        else if (key == "MemAvailable:") out.memAvailable = kib * 1024, available = true;
        else if (key == "Cached:") out.memCached = kib * 1024;
    }
    if (!total || !available) return "no MemTotal or MemAvailable in " + procRoot_ + "/meminfo";
    out.memAvailable = std::min(out.memAvailable, out.memTotal);
    out.memCached = std::min(out.memCached, out.memTotal);

    struct statvfs fs{};
    if (::statvfs(diskRoot_.c_str(), &fs) != 0)
        return "statvfs " + diskRoot_ + ": " + std::strerror(errno);
    out.diskTotal = static_cast<std::uint64_t>(fs.f_blocks) * fs.f_frsize;
    out.diskAvailable = std::min<std::uint64_t>(
        static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize, out.diskTotal);

    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    out.nowMs = static_cast<std::int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1'000'000;
    return "";
}

}  // namespace airlock::guest

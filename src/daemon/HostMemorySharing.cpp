#include "daemon/HostMemorySharing.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>

#include "core/Log.hpp"

#ifndef PR_SET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE 67
#endif

namespace airlock {
namespace {

bool readValue(const std::string& path, std::string& out) {
    std::ifstream in(path);
    if (!in || !std::getline(in, out)) return false;
    return true;
}

bool writeValue(const std::string& path, const std::string& value) {
    std::ofstream out(path);
    if (!out) return false;
    out << value << '\n';
    out.flush();
    return static_cast<bool>(out);
}

// pages_to_scan per sleep_millisecs: 1000 pages every 20 ms is 200 MiB/s,
// one pass over fifty idle guests' touched memory (about 7 GiB) in about
// 35 s, at a few percent of one core once pages stop changing (smart_scan
// skips pages that did not merge before). use_zero_pages: a zero page maps
// the kernel's zero page instead of a shared KSM page.
const std::pair<const char*, const char*> kSettings[] = {
    {"pages_to_scan", "1000"},
    {"sleep_millisecs", "20"},
    {"use_zero_pages", "1"},
};

}  // namespace

HostMemorySharing::HostMemorySharing(Mode mode, std::string recordFile, std::string ksmDir,
                                     bool setProcessFlags)
    : recordFile_(std::move(recordFile)), ksmDir_(std::move(ksmDir)) {
    if (mode == Mode::off) return;
    if (setProcessFlags) {
        // Either may be missing on an older kernel; QEMU then still marks
        // guest RAM mergeable on its own (madvise), which KSM honours.
        if (::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
            logWarn("airlockd", std::string("PR_SET_THP_DISABLE: ") + std::strerror(errno));
        if (::prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0) != 0)
            logInfo("airlockd", std::string("PR_SET_MEMORY_MERGE unavailable (") +
                                    std::strerror(errno) + "): KSM merges guest RAM only");
    }
    enableKsm();
}

HostMemorySharing::~HostMemorySharing() { restoreKsm(); }

void HostMemorySharing::enableKsm() {
    std::string run;
    if (!readValue(ksmDir_ + "/run", run)) {
        ksmState_ = "unavailable (no KSM in this kernel)";
        return;
    }
    // An airlockd that was killed left the host's values behind: KSM is on
    // because of it, and this one gives them back when it stops.
    std::map<std::string, std::string> recorded;
    {
        std::ifstream in(recordFile_);
        for (std::string line; std::getline(in, line);) {
            auto eq = line.find('=');
            if (eq != std::string::npos) recorded[line.substr(0, eq)] = line.substr(eq + 1);
        }
    }
    if (run == "1" && recorded.count("run")) {
        saved_ = std::move(recorded);
        ksmState_ = "on (airlockd)";
        return;
    }
    if (run == "1") {
        ksmState_ = "on (host)";
        return;
    }
    if (::access((ksmDir_ + "/run").c_str(), W_OK) != 0) {
        ksmState_ = "unavailable (airlockd may not write " + ksmDir_ + ")";
        return;
    }
    std::map<std::string, std::string> host{{"run", run}};
    for (const auto& [name, value] : kSettings) {
        std::string old;
        if (readValue(ksmDir_ + "/" + name, old)) host[name] = old;
    }
    {
        // Recorded before anything changes.
        std::ofstream out(recordFile_, std::ios::trunc);
        for (const auto& [name, value] : host) out << name << '=' << value << '\n';
        out.flush();
        if (!out) {
            ksmState_ = "unavailable (cannot record the host's settings in " + recordFile_ + ")";
            return;
        }
    }
    saved_ = std::move(host);
    for (const auto& [name, value] : kSettings)
        if (saved_.count(name) && !writeValue(ksmDir_ + "/" + name, value))
            logWarn("airlockd", "could not set " + ksmDir_ + "/" + name);
    if (!writeValue(ksmDir_ + "/run", "1")) {
        restoreKsm();
        ksmState_ = "unavailable (writing " + ksmDir_ + "/run failed)";
        return;
    }
    ksmState_ = "on (airlockd)";
    logInfo("airlockd", "kernel samepage merging turned on; the host's settings return on exit");
}

void HostMemorySharing::restoreKsm() noexcept try {
    // run first: the scanner stops before its rate changes back. Pages
    // already merged stay merged until written.
    auto run = saved_.find("run");
    if (run != saved_.end() && !writeValue(ksmDir_ + "/run", run->second))
        logWarn("airlockd", "could not restore " + ksmDir_ + "/run");
    for (const auto& [name, value] : saved_)
        if (name != "run" && !writeValue(ksmDir_ + "/" + name, value))
            logWarn("airlockd", "could not restore " + ksmDir_ + "/" + name);
    if (!saved_.empty()) std::remove(recordFile_.c_str());
    saved_.clear();
} catch (...) {
    // Logging failed; nothing else can.
}

}  // namespace airlock

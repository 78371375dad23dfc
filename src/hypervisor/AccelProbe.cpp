#include "hypervisor/AccelProbe.hpp"

#include <fcntl.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "core/Error.hpp"
#include "core/UniqueFd.hpp"

namespace airlock {

std::string accelName(Accel a) { return a == Accel::kvm ? "kvm" : "tcg"; }

bool cpuFlagsShowVirtualization(const std::string& cpuinfo) {
    static const std::regex flagsLine(R"(^flags\s*:.*\b(vmx|svm)\b)", std::regex::multiline);
    return std::regex_search(cpuinfo, flagsLine);
}

Accel resolveAccel(const std::string& requested) {
    if (requested == "tcg") return Accel::tcg;
    if (requested == "kvm") return Accel::kvm;
    if (requested != "auto") throw Error(ErrorCode::bad_request, "--accel must be auto, kvm or tcg");
    UniqueFd kvm(::open("/dev/kvm", O_RDWR | O_CLOEXEC));
    if (!kvm) return Accel::tcg;
    std::ifstream in("/proc/cpuinfo");
    std::stringstream ss;
    ss << in.rdbuf();
    return cpuFlagsShowVirtualization(ss.str()) ? Accel::kvm : Accel::tcg;
}

}  // namespace airlock

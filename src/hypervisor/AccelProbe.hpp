#pragma once
#include <string>

#include "hypervisor/Hypervisor.hpp"

namespace airlock {

// `auto` picks kvm only when /dev/kvm opens AND the CPU advertises vmx or svm:
// a nested paravirtualised /dev/kvm without them hangs a normal guest.
Accel resolveAccel(const std::string& requested);  // "auto" | "kvm" | "tcg"
bool cpuFlagsShowVirtualization(const std::string& cpuinfo);

}  // namespace airlock

#include "hypervisor/AccelProbe.hpp"

#include <gtest/gtest.h>

namespace airlock {
namespace {

TEST(AccelProbe, ReadsVirtualizationFlags) {
    EXPECT_TRUE(cpuFlagsShowVirtualization("processor\t: 0\nflags\t\t: fpu vme vmx sse\n"));
    EXPECT_TRUE(cpuFlagsShowVirtualization("flags\t\t: fpu svm\n"));
    EXPECT_FALSE(cpuFlagsShowVirtualization("flags\t\t: fpu vme hypervisor\n"));
    EXPECT_FALSE(cpuFlagsShowVirtualization("model name\t: vmx-looking svm name\nflags\t: fpu\n"));
    EXPECT_FALSE(cpuFlagsShowVirtualization("flags\t: fpu vmxnet\n"));
}

TEST(AccelProbe, ExplicitChoicesAreHonoured) {
    EXPECT_EQ(resolveAccel("tcg"), Accel::tcg);
    EXPECT_EQ(resolveAccel("kvm"), Accel::kvm);
    EXPECT_ANY_THROW(resolveAccel("xen"));
}

}  // namespace
}  // namespace airlock

#include "daemon/DaemonOptions.hpp"

#include <gtest/gtest.h>

namespace airlock {
namespace {

TEST(DaemonOptions, ParsesEveryFlag) {
    auto o = parseDaemonOptions({"--listen", "0.0.0.0:9000", "--data-dir", "/d", "--templates-dir", "/t", "--accel",
                                 "tcg", "--libvirt-uri", "qemu:///system"});
    EXPECT_EQ(o.listenHost, "0.0.0.0");
    EXPECT_EQ(o.listenPort, 9000);
    EXPECT_EQ(o.dataDir, "/d");
    EXPECT_EQ(o.templatesDir, "/t");
    EXPECT_EQ(o.accel, "tcg");
    EXPECT_EQ(o.libvirtUri, "qemu:///system");
}

TEST(DaemonOptions, RejectsBadFlags) {
    EXPECT_ANY_THROW(parseDaemonOptions({"--listen", "nohostport"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--listen", "h:99999"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--accel", "xen"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--data-dir"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--frobnicate"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--exec-output-cap", "12abc"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--exec-output-cap", "10"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--agent-transport", "pigeon"}));
    EXPECT_EQ(parseDaemonOptions({"--exec-output-cap", "65536"}).execOutputCap, 65536u);
}

}  // namespace
}  // namespace airlock

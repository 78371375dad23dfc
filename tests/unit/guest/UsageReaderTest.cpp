#include <gtest/gtest.h>

#include <fstream>

#include "agent/UsageReader.hpp"
#include "support/TestEnv.hpp"

namespace airlock::guest {
namespace {

void write(const std::string& p, const std::string& text) { std::ofstream(p) << text; }

TEST(UsageReader, ReadsTheCpuLineMeminfoAndTheRootDisk) {
    test::TempDir proc;
    write(proc.path() + "/stat",
          "cpu  100 5 20 800 50 1 2 3 9 0\ncpu0 50 2 10 400 25 0 1 1 4 0\n");
    write(proc.path() + "/meminfo",
          "MemTotal:        1000 kB\nMemFree:          100 kB\nMemAvailable:     600 kB\n"
          "Buffers:            1 kB\nCached:           250 kB\n");
    protocol::GuestUsage u;
    ASSERT_EQ(UsageReader(proc.path(), proc.path()).read(u), "");
    EXPECT_GE(u.cpuCount, 1u);
    EXPECT_EQ(u.cpuTicks, 100u + 5 + 20 + 800 + 50 + 1 + 2 + 3) << "guest time is in user";
    EXPECT_EQ(u.idleTicks, 850u);
    EXPECT_EQ(u.memTotal, 1000u * 1024);
    EXPECT_EQ(u.memAvailable, 600u * 1024);
    EXPECT_EQ(u.memCached, 250u * 1024);
    EXPECT_GT(u.diskTotal, 0u);
    EXPECT_LE(u.diskAvailable, u.diskTotal);
    EXPECT_GT(u.nowMs, 0);
}

TEST(UsageReader, SaysWhatItCouldNotRead) {
    test::TempDir proc;
    protocol::GuestUsage u;
    EXPECT_NE(UsageReader(proc.path()).read(u).find("no cpu line"), std::string::npos);
    write(proc.path() + "/stat", "cpu  1 2\n");
    EXPECT_NE(UsageReader(proc.path()).read(u).find("short"), std::string::npos);
    write(proc.path() + "/stat", "cpu  1 2 3 4\n");
    write(proc.path() + "/meminfo", "MemTotal: 10 kB\n");
    EXPECT_NE(UsageReader(proc.path()).read(u).find("MemAvailable"), std::string::npos);
    write(proc.path() + "/meminfo", "MemTotal: 10 kB\nMemAvailable: 5 kB\n");
    EXPECT_NE(UsageReader(proc.path(), proc.path() + "/nope").read(u).find(
                  "statvfs"),
              std::string::npos);
}

}  // namespace
}  // namespace airlock::guest

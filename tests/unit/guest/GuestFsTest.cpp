#include "agent/GuestFs.hpp"

#include <gtest/gtest.h>

#include "agent/ProcessTable.hpp"
#include "agent/Spawn.hpp"

namespace airlock::guest {
namespace {

TEST(GuestPaths, ResolvesDotsInsideTheGuestAndRejectsRelativePaths) {
    EXPECT_EQ(*normalizeGuestPath("/tmp/a/../b/./c"), "/tmp/b/c");
    EXPECT_EQ(*normalizeGuestPath("/../../etc/passwd"), "/etc/passwd");
    EXPECT_EQ(*normalizeGuestPath("//tmp//x/"), "/tmp/x");
    EXPECT_EQ(*normalizeGuestPath("/"), "/");
    EXPECT_FALSE(normalizeGuestPath("relative/path"));
    EXPECT_FALSE(normalizeGuestPath(""));
    EXPECT_FALSE(normalizeGuestPath(std::string("/tmp/a\0b", 8)));
    EXPECT_FALSE(normalizeGuestPath("/" + std::string(5000, 'a')));
}

TEST(GuestPaths, ErrnoCodesMapToHttpFamilies) {
    EXPECT_EQ(errnoCode(ENOENT), "not_found");
    EXPECT_EQ(errnoCode(EISDIR), "conflict");
    EXPECT_EQ(errnoCode(ENOTEMPTY), "conflict");
    EXPECT_EQ(errnoCode(EACCES), "permission_denied");
    EXPECT_EQ(errnoCode(EIO), "io_error");
}

TEST(OutputRing, KeepsTheLastBytesWithAbsoluteOffsets) {
    OutputRing ring(10);
    ring.append("hello");
    EXPECT_EQ(ring.read(0, 100), "hello");
    ring.append("world12345");
    EXPECT_EQ(ring.begin(), 5u);
    EXPECT_EQ(ring.end(), 15u);
    EXPECT_EQ(ring.read(0, 100), "world12345") << "reads before begin() start at begin()";
    EXPECT_EQ(ring.read(12, 2), "34");
    ring.append(std::string(25, 'z'));
    EXPECT_EQ(ring.read(0, 100), std::string(10, 'z'));
    EXPECT_EQ(ring.end(), 40u);
}

TEST(Signals, NamesAndNumbers) {
    EXPECT_EQ(signalFromName("TERM"), SIGTERM);
    EXPECT_EQ(signalFromName("SIGKILL"), SIGKILL);
    EXPECT_EQ(signalFromName("9"), 9);
    EXPECT_EQ(signalFromName("BOGUS"), 0);
    EXPECT_EQ(signalFromName("999"), 0);
}

}  // namespace
}  // namespace airlock::guest

#include "protocol/GuestPath.hpp"

#include <gtest/gtest.h>

namespace airlock::protocol {
namespace {

TEST(GuestPath, ResolvesDotsAsTheGuestDoesAndRejectsRelativePaths) {
    EXPECT_EQ(*normalizeGuestPath("/tmp/a/../b/./c"), "/tmp/b/c");
    EXPECT_EQ(*normalizeGuestPath("/../../etc/passwd"), "/etc/passwd");
    EXPECT_EQ(*normalizeGuestPath("//tmp//x/"), "/tmp/x");
    EXPECT_EQ(*normalizeGuestPath("/"), "/");
    EXPECT_FALSE(normalizeGuestPath("relative/path"));
    EXPECT_FALSE(normalizeGuestPath(""));
    EXPECT_FALSE(normalizeGuestPath(std::string("/tmp/a\0b", 8)));
    EXPECT_FALSE(normalizeGuestPath("/" + std::string(5000, 'a')));
}

}  // namespace
}  // namespace airlock::protocol

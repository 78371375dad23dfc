#include <gtest/gtest.h>

#include "core/Hex.hpp"

namespace airlock {
namespace {

TEST(Hex, EncodesEveryByteAsTwoLowerCaseDigits) {
    EXPECT_EQ(hexEncode(std::string_view("\x00\x0f\xa5\xff", 4)), "000fa5ff");
    const unsigned char raw[] = {0xde, 0xad, 0xbe, 0xef};
    EXPECT_EQ(hexEncode(raw, sizeof raw), "deadbeef");
    EXPECT_EQ(hexEncode(std::string_view()), "");
}

TEST(Hex, RecognisesLowerCaseHexOfTheGivenLength) {
    EXPECT_TRUE(isLowerHex("0123456789abcdef"));
    EXPECT_TRUE(isLowerHex(std::string(40, 'a'), 40));
    EXPECT_FALSE(isLowerHex(std::string(39, 'a'), 40));
    EXPECT_FALSE(isLowerHex("ABCDEF"));
    EXPECT_FALSE(isLowerHex("abcdeg"));
    EXPECT_FALSE(isLowerHex(""));
}

}  // namespace
}  // namespace airlock

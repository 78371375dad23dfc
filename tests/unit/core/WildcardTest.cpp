#include <gtest/gtest.h>

#include <string>

#include "core/Wildcard.hpp"

namespace airlock {
namespace {

TEST(Wildcard, StarMatchesAnyRunIncludingSlashes) {
    EXPECT_TRUE(wildcardMatch("@scope/*", "@scope/pkg/deep"));
    EXPECT_TRUE(wildcardMatch("*", ""));
    EXPECT_TRUE(wildcardMatch("git push*", "git push --force origin"));
    EXPECT_FALSE(wildcardMatch("git push*", "git pull"));
    EXPECT_TRUE(wildcardMatch("a*b*c", "aXXbYYc"));
    EXPECT_FALSE(wildcardMatch("a*b*c", "aXXbYY"));
}

TEST(Wildcard, AStarInTheTextStillLeavesTheStarItsBacktrack) {
    EXPECT_TRUE(wildcardMatch("*x", "*ax"));
    EXPECT_TRUE(wildcardMatch("rm *", "rm *"));
}

TEST(Wildcard, QuestionMarkIsOneCharacterOrLiteral) {
    EXPECT_TRUE(wildcardMatch("ca?", "cat"));
    EXPECT_FALSE(wildcardMatch("ca?", "ca"));
    EXPECT_FALSE(wildcardMatch("ca?", "cat", false));
    EXPECT_TRUE(wildcardMatch("ca?", "ca?", false));
}

TEST(Wildcard, HostilePatternsStayFast) {
    std::string text(5000, 'a');
    EXPECT_FALSE(wildcardMatch(std::string(200, '*') + "b", text));
    EXPECT_TRUE(wildcardMatch("*a*a*a*a*a*a*a*a*", text));
}

}  // namespace
}  // namespace airlock

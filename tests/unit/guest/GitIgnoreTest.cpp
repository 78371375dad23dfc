#include <gtest/gtest.h>

#include "agent/GitIgnore.hpp"
#include "agent/Sha1.hpp"
#include "protocol/PathGlob.hpp"

namespace airlock::guest {
namespace {

using protocol::wildmatch;

TEST(Wildmatch, StarsStayWithinOneDirectory) {
    EXPECT_TRUE(wildmatch("*.log", "a.log"));
    EXPECT_FALSE(wildmatch("*.log", "a/b.log"));
    EXPECT_TRUE(wildmatch("src/*.py", "src/app.py"));
    EXPECT_FALSE(wildmatch("src/*.py", "src/x/app.py"));
    EXPECT_FALSE(wildmatch("a?c", "a/c"));
    EXPECT_TRUE(wildmatch("a?c", "abc"));
}

TEST(Wildmatch, DoubleStarsSpanDirectories) {
    EXPECT_TRUE(wildmatch("**/foo", "foo"));
    EXPECT_TRUE(wildmatch("**/foo", "a/b/foo"));
    EXPECT_TRUE(wildmatch("a/**/b", "a/b"));
    EXPECT_TRUE(wildmatch("a/**/b", "a/x/y/b"));
    EXPECT_TRUE(wildmatch("src/**", "src/x/y.py"));
    EXPECT_FALSE(wildmatch("src/**", "src"));
    EXPECT_FALSE(wildmatch("src/**", "srcx/y"));
    EXPECT_FALSE(wildmatch("tests/**", "src/tests/x"));
}

TEST(Wildmatch, BracketsAndEscapes) {
    EXPECT_TRUE(wildmatch("[a-c]x", "bx"));
    EXPECT_FALSE(wildmatch("[a-c]x", "dx"));
    EXPECT_TRUE(wildmatch("[!a]x", "bx"));
    EXPECT_FALSE(wildmatch("[!a]x", "ax"));
    EXPECT_TRUE(wildmatch("\\*x", "*x"));
    EXPECT_FALSE(wildmatch("\\*x", "ax"));
    EXPECT_TRUE(wildmatch("[x", "[x"));  // no closing bracket: a literal
}

TEST(Wildmatch, ManyStarsDoNotExplode) {
    std::string pattern(64, '*');
    pattern += "b";
    std::string text(4000, 'a');
    EXPECT_FALSE(wildmatch(pattern, text));
}

TEST(GitIgnore, DirectoryRulesMatchDirectoriesAtAnyDepth) {
    GitIgnore ig;
    ig.addFile("", "node_modules/\n*.log\n!keep.log\n/build\n# comment\n\n");
    EXPECT_TRUE(ig.ignored("node_modules", true));
    EXPECT_TRUE(ig.ignored("web/node_modules", true));
    EXPECT_FALSE(ig.ignored("node_modules", false));  // a file of that name is kept
    EXPECT_TRUE(ig.ignored("x/debug.log", false));
    EXPECT_FALSE(ig.ignored("keep.log", false));
    EXPECT_TRUE(ig.ignored("build", true));
    EXPECT_FALSE(ig.ignored("src/build", true));  // anchored to its file's directory
    EXPECT_FALSE(ig.ignored("src/app.py", false));
}

TEST(GitIgnore, ADeeperFileAppliesBelowItsDirectoryOnly) {
    GitIgnore ig;
    ig.addFile("", "*.tmp\n");
    ig.addFile("sub", "/gen\n!important.tmp\n");
    EXPECT_TRUE(ig.ignored("sub/gen", true));
    EXPECT_FALSE(ig.ignored("gen", true));
    EXPECT_FALSE(ig.ignored("other/gen", true));
    EXPECT_FALSE(ig.ignored("sub/important.tmp", false));
    EXPECT_TRUE(ig.ignored("important.tmp", false));
}

TEST(Sha1, KnownDigests) {
    Sha1 empty;
    EXPECT_EQ(empty.hexDigest(), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    Sha1 abc;
    abc.update("abc");
    EXPECT_EQ(abc.hexDigest(), "a9993e364706816aba3e25717850c26c9cd0d89d");
    // git hash-object of "hello\n", fed in uneven pieces.
    Sha1 blob;
    std::string text = std::string("blob 6") + '\0' + "hello\n";
    for (char c : text) blob.update(std::string_view(&c, 1));
    EXPECT_EQ(blob.hexDigest(), "ce013625030ba8dba906f756967f9e9ca394464a");
    Sha1 longer;
    longer.update(std::string(1000, 'a'));
    EXPECT_EQ(longer.hexDigest(), "291e9a6c66994949b57ba5e650361e98fc36b1ba");
}

}  // namespace
}  // namespace airlock::guest

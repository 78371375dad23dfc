#include <gtest/gtest.h>

#include "core/Error.hpp"
#include "templates/DockerIgnore.hpp"

namespace airlock::templates {
namespace {

TEST(DockerIgnore, StarMatchesWithinOneDirectoryAtTheRoot) {
    DockerIgnore ignore("*.log\n");
    EXPECT_TRUE(ignore.ignored("app.log"));
    EXPECT_FALSE(ignore.ignored("logs/app.log"));  // anchored at the root, as Docker
    EXPECT_FALSE(ignore.ignored("app.txt"));
}

TEST(DockerIgnore, ADirectoryPatternIgnoresEverythingUnderIt) {
    DockerIgnore ignore("node_modules\nbuild/\n");
    EXPECT_TRUE(ignore.ignored("node_modules"));
    EXPECT_TRUE(ignore.ignored("node_modules/left-pad/index.js"));
    EXPECT_TRUE(ignore.ignored("build/out/a.o"));
    EXPECT_FALSE(ignore.ignored("src/node_modules/x"));
    EXPECT_FALSE(ignore.ignored("node_modules2"));
}

TEST(DockerIgnore, DoubleStarSpansAnyNumberOfDirectories) {
    DockerIgnore ignore("**/tmp\ndocs/**\na/**/z.txt\n");
    EXPECT_TRUE(ignore.ignored("tmp"));
    EXPECT_TRUE(ignore.ignored("x/y/tmp"));
    EXPECT_TRUE(ignore.ignored("x/tmp/file"));
    EXPECT_FALSE(ignore.ignored("x/tmpfile"));
    EXPECT_TRUE(ignore.ignored("docs/a/b.md"));
    EXPECT_FALSE(ignore.ignored("docs"));
    EXPECT_TRUE(ignore.ignored("a/z.txt"));
    EXPECT_TRUE(ignore.ignored("a/b/c/z.txt"));
    EXPECT_FALSE(ignore.ignored("ab/z.txt"));
}

TEST(DockerIgnore, AnExceptionReincludesAndTheLastMatchDecides) {
    DockerIgnore ignore("*.log\n!keep.log\n");
    EXPECT_TRUE(ignore.ignored("debug.log"));
    EXPECT_FALSE(ignore.ignored("keep.log"));
    DockerIgnore again("*.log\n!keep.log\nkeep.log\n");
    EXPECT_TRUE(again.ignored("keep.log"));
}

TEST(DockerIgnore, AnExceptionWorksInsideAnIgnoredDirectory) {
    DockerIgnore ignore("build\n!build/keep\n");
    EXPECT_TRUE(ignore.ignored("build/a"));
    EXPECT_FALSE(ignore.ignored("build/keep"));
    EXPECT_FALSE(ignore.ignored("build/keep/inner.txt"));
}

TEST(DockerIgnore, CommentsBlankLinesAndSpacingAreSkipped) {
    DockerIgnore ignore("# *.md is a comment\n\n   \n  secret.txt  \r\n/abs\n./dot\n !  spaced\n");
    EXPECT_FALSE(ignore.ignored("README.md"));
    EXPECT_TRUE(ignore.ignored("secret.txt"));
    EXPECT_TRUE(ignore.ignored("abs"));
    EXPECT_TRUE(ignore.ignored("dot/x"));
    EXPECT_FALSE(ignore.ignored("spaced"));
    EXPECT_FALSE(DockerIgnore("").ignored("anything"));
}

TEST(DockerIgnore, QuestionMarksClassesAndEscapes) {
    DockerIgnore ignore("file?.txt\n[a-c]*.bin\n[^x]y\n\\*literal\n");
    EXPECT_TRUE(ignore.ignored("file1.txt"));
    EXPECT_FALSE(ignore.ignored("file12.txt"));
    EXPECT_FALSE(ignore.ignored("file/.txt"));
    EXPECT_TRUE(ignore.ignored("b1.bin"));
    EXPECT_FALSE(ignore.ignored("d1.bin"));
    EXPECT_TRUE(ignore.ignored("ay"));
    EXPECT_FALSE(ignore.ignored("xy"));
    EXPECT_TRUE(ignore.ignored("*literal"));
    EXPECT_FALSE(ignore.ignored("aliteral"));
}

TEST(DockerIgnore, PathsAreCleanedBeforeMatching) {
    DockerIgnore ignore("a/b\n");
    EXPECT_TRUE(ignore.ignored("./a/b"));
    EXPECT_TRUE(ignore.ignored("a//b/"));
    EXPECT_TRUE(ignore.ignored("/a/b/c"));
    EXPECT_FALSE(ignore.ignored("."));
    EXPECT_FALSE(ignore.ignored(""));
}

TEST(DockerIgnore, InvalidPatternsAreRefusedNamingTheLine) {
    for (auto text : {"ok\n[abc\n", "ok\nfoo\\\n", "ok\n!\n"}) {
        try {
            DockerIgnore ignore(text);
            ADD_FAILURE() << text;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::unprocessable);
            EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
        }
    }
}

TEST(DockerIgnore, HostilePatternsStayFast) {
    DockerIgnore ignore(std::string(200, '*') + "a/" + std::string(50, '*') + "**/b\n");
    EXPECT_FALSE(ignore.ignored(std::string(4000, 'x')));
}

}  // namespace
}  // namespace airlock::templates

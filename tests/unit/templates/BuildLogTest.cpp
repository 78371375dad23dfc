#include "templates/BuildLog.hpp"

#include <gtest/gtest.h>

#include "support/TestEnv.hpp"

namespace airlock::templates {
namespace {

TEST(BuildLog, AFollowerGetsWhatWasWrittenThenEachNewLineThenTheEnd) {
    test::TempDir dir;
    BuildLog log(dir.path() + "/b.log");
    log.append("info", "one");
    std::vector<std::string> seen;
    bool ended = false;
    auto h = log.follow({[&](const BuildLog::Line& l) {
                             seen.push_back(l.text);
                             return true;
                         },
                         [&] { ended = true; }});
    EXPECT_NE(h, 0u);
    log.appendOutput("warn", "two\nthree");
    EXPECT_FALSE(ended);
    log.close();
    EXPECT_TRUE(ended);
    EXPECT_EQ(seen, (std::vector<std::string>{"one", "  | two", "  | three"}));
    // After the end: a late follower gets every line and its end at once.
    std::size_t late = 0;
    bool lateEnded = false;
    EXPECT_EQ(log.follow({[&](const BuildLog::Line&) { return ++late, true; }, [&] { lateEnded = true; }}), 0u);
    EXPECT_EQ(late, 3u);
    EXPECT_TRUE(lateEnded);
}

TEST(BuildLog, TheFileKeepsTheLinesAndControlBytesNeverReachThem) {
    test::TempDir dir;
    auto path = dir.path() + "/b.log";
    {
        BuildLog log(path);
        log.append("info", "a\x1b[31mred\x07");
        log.append("error", "failed");
        log.close();
        log.append("info", "after the end");  // dropped
    }
    auto lines = BuildLog::readFile(path);
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[0].text, "a [31mred ");
    EXPECT_EQ(lines[1].level, "error");
}

TEST(BuildLog, AFollowerThatWantsNoMoreIsDropped) {
    test::TempDir dir;
    BuildLog log(dir.path() + "/b.log");
    int calls = 0;
    log.follow({[&](const BuildLog::Line&) { return ++calls < 2; }, [] {}});
    for (int i = 0; i < 5; ++i) log.append("info", "x");
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(log.lines(3).size(), 2u);
}

TEST(BuildLog, ALogPastItsBoundSaysSoAndKeepsNoMore) {
    test::TempDir dir;
    BuildLog log(dir.path() + "/b.log");
    std::string line(BuildLog::kMaxLine, 'x');
    for (std::size_t i = 0; i < BuildLog::kMaxBytes / BuildLog::kMaxLine + 10; ++i) log.append("info", line);
    auto lines = log.lines();
    EXPECT_LE(lines.size(), BuildLog::kMaxBytes / BuildLog::kMaxLine + 1);
    EXPECT_NE(lines.back().text.find("bound"), std::string::npos);
}

}  // namespace
}  // namespace airlock::templates

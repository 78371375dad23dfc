#include <gtest/gtest.h>

#include "core/Error.hpp"
#include "evidence/JunitReport.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

TEST(JunitReport, ReadsSuitesCasesAndTheirOutcomes) {
    auto r = JunitReport::parse(R"(<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="all" tests="5" failures="1" errors="1" skipped="1">
  <testsuite name="demo" tests="4">
    <testcase classname="demo" name="test_add_ints" time="0.01"/>
    <testcase classname="demo" name="test_add_strings" time="0.5"><failure message="expected ab">AssertionError</failure></testcase>
    <testcase classname="demo" name="test_io"><error message="boom" type="OSError"/></testcase>
    <testcase classname="demo" name="test_later"><skipped/></testcase>
    <testsuite name="nested"><testcase name="inner" classname="n"><system-out>FAILED in text only</system-out></testcase></testsuite>
  </testsuite>
</testsuites>)");
    ASSERT_EQ(r.cases().size(), 5u);
    EXPECT_EQ(r.cases()[0].status, "passed");
    EXPECT_EQ(r.cases()[1].status, "failed");
    EXPECT_EQ(r.cases()[1].message, "expected ab");
    EXPECT_DOUBLE_EQ(r.cases()[1].timeS, 0.5);
    EXPECT_EQ(r.cases()[2].status, "error");
    EXPECT_EQ(r.cases()[3].status, "skipped");
    EXPECT_EQ(r.cases()[4].status, "passed") << "log text never decides an outcome";
    EXPECT_EQ(r.cases()[4].suite, "nested");
    EXPECT_EQ(r.count("passed"), 2u);
    EXPECT_EQ(r.failedOrError(), 2u);
    // A lone <testsuite> root, as pytest writes by default in older versions.
    auto lone = JunitReport::parse(R"(<testsuite name="s"><testcase name="a"/></testsuite>)");
    ASSERT_EQ(lone.cases().size(), 1u);
    EXPECT_EQ(lone.cases()[0].suite, "s");
}

TEST(JunitReport, HostileOrForeignFilesAreRefused) {
    for (
        const std::string& bad : {
            std::string("not xml"),
            std::string("<html><body/></html>"),
            std::string(
                R"(<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>
<testsuites><testcase name="&lol2;"/></testsuites>)"),
            std::string(
                R"(<?xml version="1.0"?><!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><testsuite><testcase name="&xxe;"/></testsuite>)"),
            std::string("<testsuite><testcase/></testsuite>"),
        })
        EXPECT_EQ(test::codeOf([&] { JunitReport::parse(bad); }), ErrorCode::bad_request) << bad;
    std::string deep;
    for (int i = 0; i < 40; ++i) deep += "<testsuite>";
    deep += "<testcase name='x'/>";
    for (int i = 0; i < 40; ++i) deep += "</testsuite>";
    EXPECT_EQ(test::codeOf([&] { JunitReport::parse(deep); }), ErrorCode::bad_request);
    EXPECT_EQ(
        test::codeOf([&] { JunitReport::parse(std::string(JunitReport::kMaxBytes + 1, ' ')); }),
        ErrorCode::bad_request);
    // A UTF-16 document cannot smuggle a DOCTYPE past the check: it is read as UTF-8.
    std::string utf16 = "\xff\xfe";
    for (char c : std::string("<!DOCTYPE x><testsuite><testcase name='a'/></testsuite>")) {
        utf16.push_back(c);
        utf16.push_back('\0');
    }
    EXPECT_EQ(test::codeOf([&] { JunitReport::parse(utf16); }), ErrorCode::bad_request);
}

}  // namespace
}  // namespace airlock

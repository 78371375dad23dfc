#include <gtest/gtest.h>

#include "protocol/Messages.hpp"

namespace airlock::protocol {
namespace {

TEST(Messages, ExecRequestRoundTrip) {
    ExecRequest r;
    r.argv = {"/bin/sh", "-c", "echo hi"};
    r.cwd = "/tmp";
    r.env = {{"A", "1"}};
    r.user = "root";
    r.timeout_ms = 5000;
    r.stdin_data = "input";
    auto back = parseExecRequest(toJson(r));
    EXPECT_EQ(back.argv, r.argv);
    EXPECT_EQ(back.cwd, "/tmp");
    EXPECT_EQ(back.env.at("A"), "1");
    EXPECT_EQ(back.user, "root");
    EXPECT_EQ(back.timeout_ms, 5000u);
    EXPECT_EQ(back.stdin_data, "input");
}

TEST(Messages, MalformedExecRequestsAreRejected) {
    for (const char* bad : {"", "[]", "{}", "{\"op\":\"exec\"}", "{\"op\":\"rm\",\"argv\":[\"x\"]}",
                            "{\"op\":\"exec\",\"argv\":[]}", "{\"op\":\"exec\",\"argv\":[1]}",
                            "{\"op\":\"exec\",\"argv\":[\"\"]}",
                            "{\"op\":\"exec\",\"argv\":[\"a\"],\"env\":{\"A=B\":\"x\"}}",
                            "{\"op\":\"exec\",\"argv\":[\"a\"],\"timeout_ms\":-1}",
                            "{\"op\":\"exec\",\"argv\":\"ls\"}"}) {
        EXPECT_THROW(parseExecRequest(bad), MessageError) << bad;
    }
}

TEST(Messages, AnOpensOpIsReadInOneLook) {
    EXPECT_EQ(openOp(R"({"op":"exec","argv":["true"]})"), "exec");
    EXPECT_EQ(openOp(R"({"argv":["true"]})"), "") << "an object without an op";
    EXPECT_EQ(openOp(R"({"op":7})"), "") << "an op that is not a string";
    EXPECT_EQ(openOp(R"(["op","exec"])"), std::nullopt) << "not an object";
    EXPECT_EQ(openOp("junk"), std::nullopt);
    EXPECT_EQ(openOp(""), std::nullopt);
}

TEST(Messages, HelloNeedsANonce) {
    EXPECT_THROW(parseHello("{\"version\":1}"), MessageError);
    EXPECT_THROW(parseHello("{\"version\":1,\"nonce\":\"\"}"), MessageError);
    EXPECT_EQ(parseHello(toJson(Hello{1, "abc"})).nonce, "abc");
}

TEST(Messages, ExecResultKeepsSignalAndTimeout) {
    ExecResult r;
    r.exit_code = 137;
    r.signal = 9;
    r.timed_out = true;
    auto back = parseExecResult(toJson(r));
    EXPECT_EQ(back.exit_code, 137);
    ASSERT_TRUE(back.signal);
    EXPECT_EQ(*back.signal, 9);
    EXPECT_TRUE(back.timed_out);
}

}  // namespace
}  // namespace airlock::protocol

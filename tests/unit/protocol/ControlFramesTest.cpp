// Every control message, as both sides write and read it: each round-trips,
// and what a hostile guest (or host) could send instead is refused.
#include <gtest/gtest.h>

#include "protocol/ControlFrames.hpp"
#include "protocol/Messages.hpp"

namespace airlock::protocol {
namespace {

TEST(ControlFrames, EveryFrameRoundTripsAsTheWireHasAlwaysCarriedIt) {
    std::vector<std::pair<ControlFrame, std::string>> frames{
        {ExecStarted{4242}, R"({"pid":4242})"},
        {FileSize{1ull << 40}, R"({"size":1099511627776})"},
        {OutputSkipped{77, 2}, R"({"channel":2,"skipped":77})"},
        {ManifestSize{123}, R"({"bytes":123})"},
        {ListenerReady{3128}, R"({"listening":3128})"},
        {ListenerAccepted{9}, R"({"accepted":9})"},
        {TunnelConnected{}, R"({"connected":true})"},
        {TunnelEof{}, R"({"eof":true})"},
        {SignalRequest{"TERM"}, R"({"signal":"TERM"})"},
        {ResizeRequest{40, 120}, R"({"resize":{"cols":120,"rows":40}})"},
        {LineToJudge{3, "git push"}, R"({"judge":{"id":3,"line":"git push"}})"},
        {LineVerdict{3, "deny", "no"}, R"({"verdict":{"id":3,"message":"no","state":"deny"}})"},
    };
    EXPECT_EQ(frames.size(), std::variant_size_v<ControlFrame>) << "every alternative is here";
    for (const auto& [frame, wire] : frames) {
        EXPECT_EQ(controlPayload(frame), wire);
        auto back = parseControl(wire);
        EXPECT_EQ(back.index(), frame.index()) << wire;
        EXPECT_EQ(controlPayload(back), wire);
    }
    auto resize = std::get<ResizeRequest>(parseControl(R"({"resize":{"rows":1,"cols":4096}})"));
    EXPECT_EQ(resize.rows, 1u);
    EXPECT_EQ(resize.cols, 4096u);
}

TEST(ControlFrames, MalformedFramesAreRefusedNeverGuessed) {
    for (const char* bad : {
             "", "not json", "[]", "{}", R"({"unknown":1})",
             R"({"pid":0})", R"({"pid":"1"})", R"({"pid":1,"size":2})",
             R"({"size":-1})", R"({"skipped":1})", R"({"skipped":1,"channel":256})",
             R"({"skipped":1,"channel":1,"more":0})", R"({"listening":0})",
             R"({"listening":70000})", R"({"accepted":-1})", R"({"connected":false})",
             R"({"eof":"yes"})", R"({"eof":false})", R"({"signal":""})", R"({"signal":7})",
             R"({"signal":"AAAAAAAAAAAAAAAAAAAAAAAA"})", R"({"resize":{"rows":0,"cols":80}})",
             R"({"resize":{"rows":24}})", R"({"resize":{"rows":24,"cols":5000}})",
             R"({"resize":{"rows":24,"cols":80,"x":1}})", R"({"resize":[24,80]})",
             R"({"bytes":1.5})", R"({"judge":{"id":1}})", R"({"judge":{"id":-1,"line":"x"}})",
             R"({"judge":{"id":1,"line":"x","more":1}})", R"({"judge":"ls"})",
             R"({"verdict":{"id":1,"state":"maybe","message":""}})",
             R"({"verdict":{"id":1,"state":"allow"}})"}) {
        EXPECT_THROW(parseControl(bad), MessageError) << bad;
    }
}

TEST(ControlFrames, ALineAndAVerdictAreBounded) {
    std::string longest(kMaxJudgedLine, 'x');
    EXPECT_EQ(std::get<LineToJudge>(parseControl(controlPayload(LineToJudge{1, longest}))).line,
              longest);
    EXPECT_THROW(parseControl(controlPayload(LineToJudge{1, longest + "x"})), MessageError);
    EXPECT_THROW(parseControl(controlPayload(
                     LineVerdict{1, "deny", std::string(kMaxVerdictMessage + 1, 'm')})),
                 MessageError);
}

TEST(Messages, OnlyAnInteractiveBashIsJudgedLineByLine) {
    for (const auto& argv : std::vector<std::vector<std::string>>{
             {"bash"}, {"/bin/bash", "-l"}, {"/usr/bin/bash", "--login", "-i"}})
        EXPECT_TRUE(isJudgeableShell(argv)) << argv[0];
    for (const auto& argv : std::vector<std::vector<std::string>>{
             {}, {"sh", "-l"}, {"bash", "-c", "git push"}, {"bash", "script.sh"},
             {"/tmp/bash"}, {"zsh"}})
        EXPECT_FALSE(isJudgeableShell(argv)) << (argv.empty() ? "" : argv[0]);
    ExecRequest r;
    r.argv = {"bash"};
    r.judge_lines = true;
    EXPECT_TRUE(parseExecRequest(toJson(r)).judge_lines);
    r.judge_lines = false;
    EXPECT_FALSE(parseExecRequest(toJson(r)).judge_lines);
}

}  // namespace
}  // namespace airlock::protocol

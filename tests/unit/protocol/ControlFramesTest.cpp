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
             R"({"bytes":1.5})"}) {
        EXPECT_THROW(parseControl(bad), MessageError) << bad;
    }
}

}  // namespace
}  // namespace airlock::protocol

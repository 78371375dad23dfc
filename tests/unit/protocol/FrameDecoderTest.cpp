#include "protocol/FrameDecoder.hpp"

#include <gtest/gtest.h>

#include <random>

#include "protocol/Frame.hpp"

namespace airlock::protocol {
namespace {

using R = FrameDecoder::Result;

TEST(FrameDecoder, RoundTripsAFrame) {
    FrameDecoder d;
    d.feed(encodeFrame(FrameType::data, 7, "hello", 2));
    Frame f;
    ASSERT_EQ(d.next(f), R::frame);
    EXPECT_EQ(f.type, FrameType::data);
    EXPECT_EQ(f.stream, 7u);
    EXPECT_EQ(f.flags, 2);
    EXPECT_EQ(f.payload, "hello");
    EXPECT_EQ(d.next(f), R::need_more);
    EXPECT_EQ(d.buffered(), 0u);
}

TEST(FrameDecoder, ReassemblesByteByByteAndBinaryPayload) {
    std::string payload;
    for (int i = 0; i < 256; ++i) payload.push_back(static_cast<char>(i));
    std::string wire = encodeFrame(FrameType::data, 1, payload) + encodeFrame(FrameType::ping, 0, "");
    FrameDecoder d;
    std::vector<Frame> frames;
    for (char c : wire) {
        d.feed(std::string_view(&c, 1));
        Frame f;
        while (d.next(f) == R::frame) frames.push_back(f);
    }
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(frames[0].payload, payload);
    EXPECT_EQ(frames[1].type, FrameType::ping);
}

TEST(FrameDecoder, TruncatedFrameWaitsForMore) {
    std::string wire = encodeFrame(FrameType::open, 3, "{\"op\":\"exec\"}");
    FrameDecoder d;
    d.feed(wire.substr(0, wire.size() - 1));
    Frame f;
    EXPECT_EQ(d.next(f), R::need_more);
    d.feed(wire.substr(wire.size() - 1));
    EXPECT_EQ(d.next(f), R::frame);
}

TEST(FrameDecoder, EncoderRefusesOversizedPayload) {
    EXPECT_THROW(encodeFrame(FrameType::data, 1, std::string(kMaxPayload + 1, 'x')), std::length_error);
    EXPECT_NO_THROW(encodeFrame(FrameType::data, 1, std::string(kMaxPayload, 'x')));
}

std::string withLength(std::string wire, std::uint32_t length) {
    // Rewrites the length and recomputes the header check, as a hostile peer would.
    wire[12] = static_cast<char>(length >> 24);
    wire[13] = static_cast<char>(length >> 16);
    wire[14] = static_cast<char>(length >> 8);
    wire[15] = static_cast<char>(length);
    std::uint32_t h = 2166136261u;
    for (int i = 0; i < 16; ++i) h = (h ^ static_cast<unsigned char>(wire[i])) * 16777619u;
    wire[16] = static_cast<char>(h >> 24);
    wire[17] = static_cast<char>(h >> 16);
    wire[18] = static_cast<char>(h >> 8);
    wire[19] = static_cast<char>(h);
    return wire;
}

TEST(FrameDecoder, OversizedLengthIsAnErrorNotAnAllocation) {
    FrameDecoder d;
    d.feed(withLength(encodeFrame(FrameType::data, 1, ""), 0xffffffffu));
    Frame f;
    EXPECT_EQ(d.next(f), R::error);
    EXPECT_NE(d.lastError().find("maximum"), std::string::npos);
    EXPECT_LE(d.buffered(), kHeaderSize);
}

TEST(FrameDecoder, GarbageIsAnErrorInStrictMode) {
    FrameDecoder d;
    d.feed("GET / HTTP/1.1\r\n\r\n");
    Frame f;
    EXPECT_EQ(d.next(f), R::error);
    EXPECT_EQ(d.next(f), R::error) << "an error is sticky until clear()";
    d.clear();
    d.feed(encodeFrame(FrameType::ping, 0, ""));
    EXPECT_EQ(d.next(f), R::frame);
}

TEST(FrameDecoder, CorruptHeaderCheckIsRejected) {
    std::string wire = encodeFrame(FrameType::data, 1, "abc");
    wire[9] ^= 0x40;  // stream id changed, check not updated
    FrameDecoder d;
    d.feed(wire);
    Frame f;
    EXPECT_EQ(d.next(f), R::error);
}

TEST(FrameDecoder, UnknownTypeAndReservedBitsAreRejected) {
    std::string wire = encodeFrame(FrameType::data, 1, "");
    {
        std::string bad = wire;
        bad[4] = 42;
        bad = withLength(bad, 0);
        FrameDecoder d;
        d.feed(bad);
        Frame f;
        EXPECT_EQ(d.next(f), R::error);
    }
    {
        std::string bad = wire;
        bad[6] = 1;
        bad = withLength(bad, 0);
        FrameDecoder d;
        d.feed(bad);
        Frame f;
        EXPECT_EQ(d.next(f), R::error);
    }
}

TEST(FrameDecoder, ResyncSkipsStaleBytesAndHalfFrames) {
    std::string stale = encodeFrame(FrameType::data, 9, std::string(100, 'z'));
    std::string wire = "\xa1junk" + stale.substr(30) + stale.substr(0, 10) + encodeFrame(FrameType::hello_ack, 0, "{}");
    FrameDecoder d;
    d.setResync(true);
    d.feed(wire);
    Frame f;
    ASSERT_EQ(d.next(f), R::frame);
    EXPECT_EQ(f.type, FrameType::hello_ack);
    EXPECT_GT(d.skippedBytes(), 0u);
}

TEST(FrameDecoder, RandomGarbageNeverCrashesOrGrowsUnbounded) {
    std::mt19937 rng(1234);
    for (int round = 0; round < 200; ++round) {
        FrameDecoder d;
        d.setResync(round % 2 == 0);
        for (int chunk = 0; chunk < 20; ++chunk) {
            std::string bytes(rng() % 512, '\0');
            for (auto& c : bytes) c = static_cast<char>(rng());
            if (chunk % 5 == 0) bytes += encodeFrame(FrameType::ping, 0, "x");
            d.feed(bytes);
            Frame f;
            R r;
            while ((r = d.next(f)) == R::frame) {
            }
            if (r == R::error) d.clear();
            EXPECT_LE(d.buffered(), kHeaderSize + kMaxPayload + 1024);
        }
    }
}

TEST(FrameDecoder, WindowPayload) {
    std::uint32_t c = 0;
    EXPECT_TRUE(decodeWindowPayload(encodeWindowPayload(123456), c));
    EXPECT_EQ(c, 123456u);
    EXPECT_FALSE(decodeWindowPayload("abc", c));
}

}  // namespace
}  // namespace airlock::protocol

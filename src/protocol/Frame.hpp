#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace airlock::protocol {

// Wire format of one frame (all integers big-endian):
//
//   magic[4] = A1 'L' 'K' 01   lets a reader find a frame boundary in stale bytes
//   type u8, flags u8, reserved u16 (0)
//   stream u32                 0 = the connection itself (hello, ping)
//   length u32                 payload bytes, at most kMaxPayload
//   check u32                  FNV-1a of the 16 bytes above: a magic found inside
//                              garbage is not mistaken for a header
//   payload[length]            JSON for control frames, raw bytes for data
//
// One byte stream (virtio-serial) carries many streams; each direction of a
// stream has a credit window (kInitialWindow) refilled by WINDOW frames, so a
// slow consumer of one stream never stalls the others.
inline constexpr std::size_t kHeaderSize = 20;
inline constexpr std::size_t kMaxPayload = 256 * 1024;
inline constexpr std::uint32_t kInitialWindow = 1024 * 1024;
inline constexpr unsigned char kMagic[4] = {0xA1, 'L', 'K', 0x01};

enum class FrameType : std::uint8_t {
    hello = 1,      // host -> agent: {"version","nonce"}
    hello_ack = 2,  // agent -> host: {"version","nonce","epoch","agent"}
    open = 3,       // host -> agent: {"op":"exec",...}
    data = 4,       // raw bytes; flags = channel (0 stdin/upload, 1 stdout/download, 2 stderr)
    window = 5,     // payload: u32 credit increment
    close = 6,      // host -> agent: end of its data (EOF); agent -> host: end of stream + JSON result
    reset = 7,      // abort a stream (or, on stream 0, the session): {"code","message"}
    ping = 8,
    pong = 9,
    control = 10,   // in-stream JSON: host -> agent {"signal"} / {"resize"}; agent -> host {"pid"}
};

bool isKnownFrameType(std::uint8_t t);

enum class Channel : std::uint8_t { stdin_ = 0, stdout_ = 1, stderr_ = 2 };

struct Frame {
    FrameType type = FrameType::ping;
    std::uint8_t flags = 0;
    std::uint32_t stream = 0;
    std::string payload;
};

// Serialises one frame; throws std::length_error when the payload exceeds kMaxPayload.
std::string encodeFrame(const Frame& frame);
std::string encodeFrame(FrameType type, std::uint32_t stream, std::string_view payload,
                        std::uint8_t flags = 0);
// The same frame appended to `out`: a sender with its own queue copies the
// payload once (under TCG every copy of a download's bytes is emulated).
void appendFrame(std::string& out, FrameType type, std::uint32_t stream, std::string_view payload,
                 std::uint8_t flags = 0);

std::string encodeWindowPayload(std::uint32_t credit);
// Returns false when the payload is not exactly 4 bytes.
bool decodeWindowPayload(std::string_view payload, std::uint32_t& credit);

}  // namespace airlock::protocol

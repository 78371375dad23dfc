#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace airlock::e2b {

// The Connect protocol's envelope for streaming calls: one flags byte, a
// 4-byte big-endian length, then the payload (JSON here).
enum EnvelopeFlags : std::uint8_t {
    kEnvelopeMessage = 0x00,
    kEnvelopeCompressed = 0x01,  // never sent; refused when received
    kEnvelopeEndStream = 0x02,
};

std::string encodeEnvelope(std::uint8_t flags, std::string_view payload);

struct Envelope {
    std::uint8_t flags = 0;
    std::string payload;
};

// A server-streaming request body is exactly one uncompressed message
// envelope; anything else (short, trailing bytes, compressed, an end-stream,
// longer than maxPayload) is Error(bad_request).
Envelope parseSingleEnvelope(std::string_view body, std::size_t maxPayload);

// An envelope's first five bytes: flags and the big-endian payload length.
inline constexpr std::size_t kEnvelopeHeaderSize = 5;
struct EnvelopeHeader {
    std::uint8_t flags = 0;
    std::size_t length = 0;
};
// nullopt while fewer than five bytes have arrived.
std::optional<EnvelopeHeader> envelopeHeader(std::string_view bytes);

}  // namespace airlock::e2b

#include "protocol/Frame.hpp"

#include <stdexcept>

#include "protocol/FrameCheck.hpp"

namespace airlock::protocol {

bool isKnownFrameType(std::uint8_t t) { return t >= 1 && t <= 10; }

namespace {
void putU32(std::string& out, std::uint32_t v) {
    out.push_back(static_cast<char>(v >> 24));
    out.push_back(static_cast<char>(v >> 16));
    out.push_back(static_cast<char>(v >> 8));
    out.push_back(static_cast<char>(v));
}
}  // namespace

void appendFrame(std::string& out, FrameType type, std::uint32_t stream, std::string_view payload,
                 std::uint8_t flags) {
    if (payload.size() > kMaxPayload) throw std::length_error("frame payload exceeds kMaxPayload");
    const std::size_t start = out.size();
    out.reserve(start + kHeaderSize + payload.size());
    out.append(reinterpret_cast<const char*>(kMagic), 4);
    out.push_back(static_cast<char>(type));
    out.push_back(static_cast<char>(flags));
    out.push_back(0);
    out.push_back(0);
    putU32(out, stream);
    putU32(out, static_cast<std::uint32_t>(payload.size()));
    putU32(out, headerCheck(out.data() + start));
    out.append(payload);
}

std::string encodeFrame(FrameType type, std::uint32_t stream, std::string_view payload,
                        std::uint8_t flags) {
    std::string out;
    appendFrame(out, type, stream, payload, flags);
    return out;
}

std::string encodeFrame(const Frame& frame) {
    return encodeFrame(frame.type, frame.stream, frame.payload, frame.flags);
}

std::string encodeWindowPayload(std::uint32_t credit) {
    std::string out;
    putU32(out, credit);
    return out;
}

bool decodeWindowPayload(std::string_view payload, std::uint32_t& credit) {
    if (payload.size() != 4) return false;
    credit = readU32(reinterpret_cast<const unsigned char*>(payload.data()));
    return true;
}

}  // namespace airlock::protocol

// libFuzzer target: arbitrary bytes, fed in arbitrary chunk sizes, in strict
// or resync mode. The decoder must never crash, never buffer more than one
// frame plus one feed, and every frame it yields must re-encode to itself.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/Frame.hpp"
#include "protocol/FrameDecoder.hpp"

using namespace airlock::protocol;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    FrameDecoder decoder;
    decoder.setResync(data[0] & 1);
    std::size_t chunk = 1 + data[1] % 64;
    std::string_view input(reinterpret_cast<const char*>(data + 2), size - 2);
    while (!input.empty()) {
        std::size_t n = std::min(chunk, input.size());
        decoder.feed(input.substr(0, n));
        input.remove_prefix(n);
        Frame frame;
        FrameDecoder::Result r;
        while ((r = decoder.next(frame)) == FrameDecoder::Result::frame) {
            if (frame.payload.size() > kMaxPayload) std::abort();
            if (encodeFrame(frame).size() != kHeaderSize + frame.payload.size()) std::abort();
        }
        if (r == FrameDecoder::Result::error) decoder.clear();
        if (decoder.buffered() > kHeaderSize + kMaxPayload + 64) std::abort();
    }
    return 0;
}

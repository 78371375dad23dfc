#include "agent/RawBaseline.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "agent/ExecStream.hpp"
#include "agent/StreamHandler.hpp"
#include "protocol/JsonText.hpp"

namespace airlock::guest {

namespace {
constexpr std::size_t kBlock = 64 * 1024;
}

std::optional<ChannelBaseline::Refusal> RawBaseline::start(std::uint32_t stream,
                                                           std::string_view openPayload,
                                                           bool channelIdle, BaselinePort& port) {
    auto request = nlohmann::json::parse(openPayload, nullptr, false);
    Mode mode = Mode::framing;
    std::uint64_t bytes = 0;
    if (request.is_object()) {
        if (auto m = request.find("mode"); m != request.end() && m->is_string())
            mode = *m == "sink"     ? Mode::sink
                   : *m == "source" ? Mode::source
                   : *m == "echo"   ? Mode::echo
                                    : Mode::framing;
        if (auto b = request.find("bytes"); b != request.end() && b->is_number_unsigned())
            bytes = b->get<std::uint64_t>();
    }
    if (mode == Mode::framing || bytes == 0 || bytes > (1ull << 32))
        return Refusal{"bad_request", "raw wants mode sink|source|echo and 1..4 GiB"};
    if (active() || !channelIdle) return Refusal{"busy", "raw mode needs an idle channel"};
    stream_ = stream;
    mode_ = mode;
    remaining_ = bytes;
    startedMs_ = monotonicMs();
    // From the byte after this frame on, the channel carries raw bytes.
    port.sendFrame(protocol::FrameType::control, stream, R"({"raw":true})");
    return std::nullopt;
}

std::size_t RawBaseline::consume(std::string_view bytes, BaselinePort& port) {
    if (mode_ != Mode::sink && mode_ != Mode::echo) return 0;
    auto n = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, bytes.size()));
    if (mode_ == Mode::echo) port.writeRaw(bytes.substr(0, n));
    remaining_ -= n;
    if (remaining_ == 0) finish(port);
    return n;
}

bool RawBaseline::wantsToWrite(const BaselinePort& port, std::size_t highWater) const {
    return mode_ == Mode::source && port.queued() < highWater;
}

void RawBaseline::pump(BaselinePort& port, std::size_t highWater) {
    static const std::string block(kBlock, 'r');
    while (mode_ == Mode::source && remaining_ > 0 && port.queued() < highWater) {
        auto n = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, block.size()));
        port.writeRaw(std::string_view(block).substr(0, n));
        remaining_ -= n;
    }
    if (mode_ == Mode::source && remaining_ == 0) finish(port);
}

void RawBaseline::finish(BaselinePort& port) {
    std::int64_t ms = monotonicMs() - startedMs_;
    std::uint32_t stream = stream_;
    mode_ = Mode::framing;
    stream_ = 0;
    port.sendFrame(protocol::FrameType::close, stream, jsonText({{"ms", ms}}));
}

}  // namespace airlock::guest

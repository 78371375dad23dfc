#include "agent/StreamHandler.hpp"

#include <algorithm>

#include "protocol/JsonText.hpp"

namespace airlock::guest {
namespace {
constexpr std::size_t kChunk = 256 * 1024;  // one full frame: per-frame costs dominate under TCG
}

void StreamHandler::onData(std::uint8_t, std::string) {
    fail("bad_frame", "this stream takes no data");
}

void StreamHandler::addCredit(std::uint32_t credit) {
    sendCredit_ = std::min<std::uint64_t>(sendCredit_ + credit, 1ull << 32);
}

bool StreamHandler::acceptIncoming(std::size_t bytes) {
    if (bytes > recvCredit_) {
        fail("flow_control", "host overran the stream window");
        return false;
    }
    recvCredit_ -= bytes;
    return true;
}

void StreamHandler::grant(std::size_t bytes) {
    if (done_ || bytes == 0) return;
    recvCredit_ += bytes;
    sink_.sendFrame(protocol::FrameType::window, id_,
                    protocol::encodeWindowPayload(static_cast<std::uint32_t>(bytes)));
}

std::size_t StreamHandler::sendable() const {
    if (done_ || !sink_.outputRoom()) return 0;
    return static_cast<std::size_t>(
        std::min<std::uint64_t>({sendCredit_, kChunk, protocol::kMaxPayload}));
}

void StreamHandler::sendData(std::uint8_t channel, std::string_view bytes) {
    if (done_ || bytes.empty()) return;
    sendCredit_ -= std::min<std::uint64_t>(sendCredit_, bytes.size());
    sink_.sendFrame(protocol::FrameType::data, id_, bytes, channel);
}

void StreamHandler::sendControl(const protocol::ControlFrame& frame) {
    if (!done_) sink_.sendFrame(protocol::FrameType::control, id_, protocol::controlPayload(frame));
}

void StreamHandler::finish(const nlohmann::json& result) {
    if (done_) return;
    sink_.sendFrame(protocol::FrameType::close, id_, jsonText(result));
    done_ = true;
}

void StreamHandler::fail(const std::string& code, const std::string& message) {
    if (done_) return;
    sink_.sendFrame(protocol::FrameType::reset, id_,
                    jsonText({{"code", code}, {"message", message}}));
    done_ = true;
}

}  // namespace airlock::guest

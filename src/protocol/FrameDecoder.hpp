#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include "protocol/Frame.hpp"

namespace airlock::protocol {

// Incremental decoder. Feed it bytes as they arrive, then call next() until it
// stops returning Result::frame. Its buffer never holds more than one frame
// plus one feed, so memory stays bounded whatever the peer sends.
//
// In resync mode (the host before the agent answered its hello, because
// virtio-serial hands a new connection whatever bytes were queued for the old
// one) invalid bytes are skipped until a valid header appears. Outside resync
// mode any invalid header is a protocol error and the connection must be reset.
class FrameDecoder {
public:
    enum class Result { frame, need_more, error };

    void feed(std::string_view bytes);
    Result next(Frame& out);

    void setResync(bool on) { resync_ = on; }
    bool resync() const { return resync_; }
    const std::string& lastError() const { return error_; }
    std::size_t skippedBytes() const { return skipped_; }
    std::size_t buffered() const { return buffer_.size() - offset_; }
    void clear();
    // Hands back the bytes not decoded yet (the channel leaves framing).
    std::string takeBuffered();

private:
    // Returns an empty string when the header at offset_ is valid.
    std::string checkHeader() const;
    void skipOneByteToMagic();
    void compact();

    std::string buffer_;
    std::size_t offset_ = 0;
    bool resync_ = false;
    std::string error_;
    std::size_t skipped_ = 0;
};

}  // namespace airlock::protocol

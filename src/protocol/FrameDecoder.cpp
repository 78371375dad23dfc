#include "protocol/FrameDecoder.hpp"

#include <cstring>

#include "protocol/FrameCheck.hpp"

namespace airlock::protocol {

void FrameDecoder::feed(std::string_view bytes) {
    compact();
    buffer_.append(bytes);
}

void FrameDecoder::clear() {
    buffer_.clear();
    offset_ = 0;
    error_.clear();
}

std::string FrameDecoder::takeBuffered() {
    std::string rest = buffer_.substr(offset_);
    buffer_.clear();
    offset_ = 0;
    return rest;
}

void FrameDecoder::compact() {
    if (offset_ == 0) return;
    buffer_.erase(0, offset_);
    offset_ = 0;
}

std::string FrameDecoder::checkHeader() const {
    const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + offset_);
    if (std::memcmp(p, kMagic, 4) != 0) return "bad frame magic";
    if (readU32(p + 16) != headerCheck(buffer_.data() + offset_)) return "bad frame header check";
    if (!isKnownFrameType(p[4])) return "unknown frame type " + std::to_string(p[4]);
    if (p[6] != 0 || p[7] != 0) return "reserved header bits set";
    if (readU32(p + 12) > kMaxPayload) return "frame payload exceeds the maximum";
    return {};
}

void FrameDecoder::skipOneByteToMagic() {
    // Drop at least one byte, then everything up to the next possible magic.
    std::size_t start = offset_ + 1;
    auto pos = buffer_.find(static_cast<char>(kMagic[0]), start);
    std::size_t next = pos == std::string::npos ? buffer_.size() : pos;
    skipped_ += next - offset_;
    offset_ = next;
}

FrameDecoder::Result FrameDecoder::next(Frame& out) {
    while (true) {
        if (!error_.empty()) return Result::error;
        std::size_t avail = buffer_.size() - offset_;
        if (resync_ && avail > 0 && static_cast<unsigned char>(buffer_[offset_]) != kMagic[0]) {
            skipOneByteToMagic();
            continue;
        }
        if (avail < kHeaderSize) {
            // Even a partial header can be judged by its magic prefix.
            std::size_t n = avail < 4 ? avail : 4;
            if (std::memcmp(buffer_.data() + offset_, kMagic, n) != 0) {
                if (resync_) {
                    skipOneByteToMagic();
                    continue;
                }
                error_ = "bad frame magic";
                return Result::error;
            }
            return Result::need_more;
        }
        std::string problem = checkHeader();
        if (!problem.empty()) {
            if (resync_) {
                skipOneByteToMagic();
                continue;
            }
            error_ = problem;
            return Result::error;
        }
        const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + offset_);
        std::uint32_t length = readU32(p + 12);
        if (avail < kHeaderSize + length) return Result::need_more;
        out.type = static_cast<FrameType>(p[4]);
        out.flags = p[5];
        out.stream = readU32(p + 8);
        out.payload.assign(buffer_.data() + offset_ + kHeaderSize, length);
        offset_ += kHeaderSize + length;
        if (offset_ == buffer_.size()) clear();
        return Result::frame;
    }
}

}  // namespace airlock::protocol

#include "egress/ChunkedScanner.hpp"

#include <algorithm>

namespace airlock::egress {

namespace {
int hexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}
constexpr std::size_t kMaxLine = 1024;  // a size line with its extensions
}  // namespace

ChunkedScanner::Result ChunkedScanner::fail(std::string why) {
    error_ = std::move(why);
    return Result::error;
}

ChunkedScanner::Result ChunkedScanner::scan(std::string_view bytes, std::size_t& used) {
    used = 0;
    if (!error_.empty()) return Result::error;
    while (used < bytes.size()) {
        char c = bytes[used];
        switch (state_) {
            case State::size: {
                int v = hexValue(c);
                if (v >= 0) {
                    if (++sizeDigits_ > 15) return fail("a chunk size over 15 hex digits");
                    remaining_ = remaining_ * 16 + static_cast<std::uint64_t>(v);
                    ++used;
                    break;
                }
                if (sizeDigits_ == 0) return fail("a chunk without a size");
                if (c == ';' || c == ' ' || c == '\t') {
                    state_ = State::extension;
                    lineLength_ = 0;
                    ++used;
                    break;
                }
                if (c != '\r') return fail("a chunk size line that is not hex");
                state_ = State::sizeLf;
                ++used;
                break;
            }
            case State::extension:
                if (c == '\n') return fail("a bare LF in a chunk size line");
                if (++lineLength_ > kMaxLine) return fail("a chunk extension over 1 KiB");
                if (c == '\r') state_ = State::sizeLf;
                ++used;
                break;
            case State::sizeLf:
                if (c != '\n') return fail("a chunk size line without CRLF");
                ++used;
                sizeDigits_ = 0;
                if (remaining_ == 0) {
                    last_ = true;
                    state_ = State::trailer;
                    lineLength_ = 0;
                } else {
                    state_ = State::data;
                }
                break;
            case State::data: {
                auto take = static_cast<std::size_t>(
                    std::min<std::uint64_t>(remaining_, bytes.size() - used));
                used += take;
                remaining_ -= take;
                if (remaining_ == 0) state_ = State::dataCr;
                break;
            }
            case State::dataCr:
                if (c != '\r') return fail("chunk data longer than its size");
                state_ = State::dataLf;
                ++used;
                break;
            case State::dataLf:
                if (c != '\n') return fail("chunk data without CRLF");
                state_ = State::size;
                ++used;
                break;
            case State::trailer:
                if (c != '\r') return fail("trailers after a chunked body are refused here");
                state_ = State::trailerLf;
                ++used;
                break;
            case State::trailerLf:
                if (c != '\n') return fail("the chunked body does not end with CRLF");
                ++used;
                // Ready for the next message on the connection.
                state_ = State::size;
                remaining_ = 0;
                last_ = false;
                return Result::done;
        }
    }
    return Result::more;
}

}  // namespace airlock::egress

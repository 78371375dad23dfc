#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace airlock::egress {

// Where a chunked request body ends, found as its bytes stream past (they
// are forwarded as they come; only the framing is read). Trailers are
// refused: one could carry what a head may not, after the head was checked.
class ChunkedScanner {
  public:
    enum class Result { more, done, error };
    // Reads from `bytes`; `used` is how many of them belong to the body
    // (all of them for `more`; up to its end for `done`).
    Result scan(std::string_view bytes, std::size_t& used);
    const std::string& error() const { return error_; }

  private:
    enum class State { size, extension, sizeLf, data, dataCr, dataLf, trailer, trailerLf };
    Result fail(std::string why);
    State state_ = State::size;
    std::uint64_t remaining_ = 0;
    std::size_t sizeDigits_ = 0;
    std::size_t lineLength_ = 0;
    bool last_ = false;
    std::string error_;
};

}  // namespace airlock::egress

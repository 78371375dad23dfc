#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::e2b {

// A multipart/form-data body split into its parts as its bytes arrive: a
// part's data is handed on before the part ends, holding back only what
// could be the start of the next delimiter. Memory is bounded whatever the
// body's size: one part's headers (16 KiB), a preamble (64 KiB), a
// delimiter. Error(bad_request) for a malformed body.
class MultipartReader {
  public:
    struct Event {
        enum class Kind { part_start, data, part_end };
        Kind kind;
        std::string name, filename;  // part_start: Content-Disposition's (filename verbatim)
        std::string bytes;           // data
    };
    static constexpr std::size_t kMaxHeaderBytes = 16 * 1024;
    static constexpr std::size_t kMaxPreambleBytes = 64 * 1024;

    explicit MultipartReader(std::string_view boundary, std::size_t maxParts = 1000);
    // Appends the events these bytes complete to `out`.
    void feed(std::string_view bytes, std::vector<Event>& out);
    // The body ended: Error(bad_request) unless its closing delimiter came.
    void finish() const;
    bool done() const { return state_ == State::epilogue; }

  private:
    enum class State { preamble, after_delimiter, headers, data, epilogue };
    void step(std::vector<Event>& out);

    std::string delimiter_;  // "\r\n--" + boundary: what ends a part's data
    std::size_t maxParts_;
    std::size_t parts_ = 0;
    State state_ = State::preamble;
    std::string pending_;  // bytes not yet judged
};

}  // namespace airlock::e2b

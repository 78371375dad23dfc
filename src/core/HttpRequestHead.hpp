#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace airlock {

// One HTTP/1.x request head as a guest client sent it to one of airlockd's
// proxies in the guest's path (egress, packages): the request line and the
// header lines, checked once by one parser for both.
struct HttpRequestHead {
    struct Header {
        std::string name;   // lower case
        std::string value;  // spaces and tabs around it trimmed
        std::string line;   // verbatim, without its line end
    };
    std::string method, target, version;
    std::vector<Header> headers;  // in the order sent
    // The first header of that (lower-case) name.
    std::optional<std::string> header(std::string_view name) const;
};

// Finds and checks the head at the start of what a client sent: CRLF line
// ends (a bare LF accepted), no stray CR or NUL (a line break to some
// servers), a method of capitals, a target without spaces or controls,
// HTTP/1.0 or 1.1, "name: value" lines without folding, at most 16 KiB and
// 100 header lines.
class HttpRequestHeadParser {
  public:
    static constexpr std::size_t kMaxHead = 16 * 1024;
    static constexpr std::size_t kMaxHeaders = 100;
    enum class Status { need_more, complete, error };

    // On complete, `headLength` is the head's size with its blank line (what
    // follows is body or tunnel bytes); on error, error() says why and
    // errorStatus() which HTTP status fits (400, 431, 505).
    Status parse(std::string_view buffered, HttpRequestHead& out, std::size_t& headLength);
    const std::string& error() const { return error_; }
    int errorStatus() const { return errorStatus_; }

  protected:
    // Records why (and which status fits) and answers error.
    Status fail(int status, std::string why);

  private:
    std::string error_;
    int errorStatus_ = 400;
};

}  // namespace airlock

#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace airlock::egress {

// The head of one request a guest client sent to its proxy: CONNECT
// host:port (HTTPS and anything else tunnelled, never intercepted) or an
// absolute-form plain HTTP request ("GET http://host/path HTTP/1.1").
struct ProxyRequest {
    std::string method;
    std::string host;  // normalized: lower case, IPv6 without brackets
    std::uint16_t port = 0;
    bool connect = false;
    // For plain HTTP: the head to send upstream (origin-form target, the
    // proxy's own headers dropped, Connection: close so that one connection
    // carries one checked request).
    std::string upstreamHead;
    std::string destination() const;  // host:port, [v6]:port
};

// The proxy's reading of a head that core's HttpRequestHeadParser checked.
class ProxyRequestParser {
  public:
    enum class Status { need_more, complete, error };

    // Looks for a complete head at the start of `buffered`. On complete,
    // `headLength` is its size (what follows is body or tunnel bytes); on
    // error, `error()` says why and `errorStatus()` which HTTP status fits.
    Status parse(std::string_view buffered, ProxyRequest& out, std::size_t& headLength);
    const std::string& error() const { return error_; }
    int errorStatus() const { return errorStatus_; }

  private:
    Status fail(int status, std::string why);
    std::string error_;
    int errorStatus_ = 400;
};

}  // namespace airlock::egress

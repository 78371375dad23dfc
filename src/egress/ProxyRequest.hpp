#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "core/HttpRequestHead.hpp"

namespace airlock::egress {

// The head of one request a guest client sent to its proxy: CONNECT
// host:port (HTTPS and anything else tunnelled; intercepted only for a host
// an injected secret goes to) or an
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

// What the proxy answers a guest client it refuses: the status, a plain
// text body "airlock egress: <message>", and the connection's end.
std::string proxyRefusal(int status, const std::string& message);

// The proxy's reading of a head: the one head parser's checks, then what
// only a forward proxy asks of a target (its error() and errorStatus() say
// why either refused it).
class ProxyRequestParser : public HttpRequestHeadParser {
  public:
    // Looks for a complete head at the start of `buffered`. On complete,
    // `headLength` is its size (what follows is body or tunnel bytes).
    Status parse(std::string_view buffered, ProxyRequest& out, std::size_t& headLength);
};

}  // namespace airlock::egress

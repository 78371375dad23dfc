#pragma once
#include <chrono>
#include <map>
#include <string>

namespace boost::asio::ssl {
class context;
}

namespace airlock::fleet {

// Where a request goes: a host and port, TLS when a context is given.
struct HttpPeer {
    std::string host, port;
    boost::asio::ssl::context* tls = nullptr;  // verifies the peer's name against host
};

// How one request ended. `unreachable`: it never went out whole, so the
// peer did not act on it; `no_answer`: it went out and nothing came back in
// time, so whether it took effect is unknown.
enum class HttpOutcome { answered, unreachable, no_answer };

struct HttpAnswer {
    HttpOutcome outcome = HttpOutcome::unreachable;
    int status = 0;
    std::string body;
    std::string why;  // for unreachable and no_answer
};

// One HTTP/1.1 request on a connection of its own (Connection: close),
// bounded by `deadline` from connect to the last byte of the answer; the
// answer's body is bounded by maxBody (beyond it: no_answer). Never throws
// for network faults: they are outcomes.
HttpAnswer httpExchange(const HttpPeer& peer, const std::string& method, const std::string& target,
                        const std::map<std::string, std::string>& headers, const std::string& body,
                        std::chrono::steady_clock::time_point deadline,
                        std::size_t maxBody = 64u << 20);

// host and port of an http(s)://HOST:PORT URL (no path, no user info);
// false when it is not one.
bool parseOrigin(const std::string& url, bool& tls, std::string& host, std::string& port);
// An http:// URL whose host is not a loopback address: what goes to it
// (callers' identities, sandboxes' memory) crosses a network in clear text.
bool plainHttpBeyondLoopback(const std::string& url);

}  // namespace airlock::fleet

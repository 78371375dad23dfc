#pragma once
#include <array>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <string>

namespace boost::asio::ssl {
class context;
}

namespace airlock::api {

class TlsPipe;

// A request for a sandbox another node of the fleet owns, after this node
// admitted its caller: the head goes to the owner with the caller signed
// into it (fleet::NodeCredential) and the client's own credentials and
// node headers removed, then bytes are piped raw both ways (a body as it
// arrives, the answer, WebSocket frames), each direction reading only once
// its last write is done, so neither side's speed makes anything buffer.
// The forwarded request asks the owner to close after answering (unless it
// is an upgrade): one forwarded request per connection. Ten minutes
// without a byte either way end it (a stalled client or owner holds no
// connection for ever; a quiet exec stream sends its keepalives).
class ForwardSession : public std::enable_shared_from_this<ForwardSession> {
  public:
    struct Target {
        std::string node, host, port;
        boost::asio::ssl::context* tls = nullptr;    // https: verified against this
        std::map<std::string, std::string> headers;  // the node credential
    };
    ForwardSession(boost::beast::tcp_stream&& client, boost::beast::flat_buffer&& buffer,
                   boost::beast::http::request<boost::beast::http::empty_body>&& head,
                   Target target, std::shared_ptr<void> slots);
    void start();

  private:
    struct Direction {
        boost::beast::tcp_stream* from;
        boost::beast::tcp_stream* to;
        std::array<char, 64 * 1024> buffer;
        bool done = false;
    };
    void onConnected(boost::beast::error_code ec);
    void sendHead();
    void pump(Direction& d);
    void unavailable(const std::string& why);
    void finish();
    void watchIdle();

    boost::beast::tcp_stream client_;
    // The owner's connection, or, when it speaks TLS, one end of a socket
    // pair whose other end ownerTls_ carries to it.
    boost::beast::tcp_stream owner_;
    std::shared_ptr<TlsPipe> ownerTls_;
    boost::beast::flat_buffer buffer_;
    boost::beast::http::request<boost::beast::http::empty_body> head_;
    Target target_;
    std::shared_ptr<void> slots_;
    std::string first_;
    std::unique_ptr<Direction> up_, down_;  // client -> owner, owner -> client
    bool finished_ = false;
    boost::asio::steady_timer idleTimer_;
    std::chrono::steady_clock::time_point lastActivity_;
};

}  // namespace airlock::api

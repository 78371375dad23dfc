#pragma once
#include <array>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace airlock::api {

// One TLS connection: the handshake, then bytes both ways between the TLS
// stream and a local socket whose other end speaks plain HTTP. As a server
// the other end is an ordinary HttpSession: every session type (JSON,
// uploads, downloads, WebSockets, previews) thus gets HTTPS and WSS without
// knowing it. As a client it is a ForwardSession's connection to another
// node whose advertise URL is https. Memory per connection: two 16 KiB
// buffers plus OpenSSL's own.
class TlsPipe : public std::enable_shared_from_this<TlsPipe> {
  public:
    TlsPipe(boost::asio::ip::tcp::socket&& client,
            boost::asio::local::stream_protocol::socket&& inner, boost::asio::ssl::context& ctx,
            std::shared_ptr<void> connectionSlot);
    void start();

    // The client side, on a connected socket: the peer's certificate must
    // name `peer.host` and chain to ctx's trust. onReady(error) once the
    // handshake ends either way (the bytes flow from then on).
    struct ClientOf {
        std::string host;
    };
    TlsPipe(boost::asio::ip::tcp::socket&& server,
            boost::asio::local::stream_protocol::socket&& inner, boost::asio::ssl::context& ctx,
            ClientOf peer);
    void startClient(std::function<void(boost::system::error_code)> onReady);
    void close();

  private:
    void clientToInner();
    void innerToClient();
    // Closes the connection when `timer` expires first (a client that stops
    // reading, or never answers the TLS close): the ssl layer's own waits
    // are not bounded by the tcp_stream's timeouts.
    void arm(boost::asio::steady_timer& timer, std::chrono::steady_clock::duration after);

    boost::beast::ssl_stream<boost::beast::tcp_stream> tls_;
    boost::asio::local::stream_protocol::socket inner_;
    std::shared_ptr<void> connectionSlot_;
    boost::asio::steady_timer writeDeadline_;
    boost::asio::steady_timer shutdownDeadline_;
    std::array<char, 16 * 1024> up_{};
    std::array<char, 16 * 1024> down_{};
    bool closed_ = false;
    bool client_ = false;
    // As a client a half-close passes on as TCP's (the server's pipe reads
    // it as the end of the request); the pipe ends when both sides have.
    bool tlsDone_ = false, innerDone_ = false;
};

}  // namespace airlock::api

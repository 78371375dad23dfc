#include "api/TlsPipe.hpp"

#include <openssl/ssl.h>

#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/write.hpp>

namespace airlock::api {
namespace asio = boost::asio;
namespace beast = boost::beast;
using namespace std::chrono_literals;

namespace {
constexpr auto kHandshakeTimeout = 10s;
constexpr auto kShutdownTimeout = 2s;
constexpr auto kWriteTimeout = 60s;  // as an HttpSession's own writes
}  // namespace

TlsPipe::TlsPipe(asio::ip::tcp::socket&& client, asio::local::stream_protocol::socket&& inner,
                 asio::ssl::context& ctx, std::shared_ptr<void> connectionSlot)
    : tls_(beast::tcp_stream(std::move(client)), ctx),
      inner_(std::move(inner)),
      connectionSlot_(std::move(connectionSlot)),
      writeDeadline_(tls_.get_executor()),
      shutdownDeadline_(tls_.get_executor()) {}

TlsPipe::TlsPipe(asio::ip::tcp::socket&& server, asio::local::stream_protocol::socket&& inner,
                 asio::ssl::context& ctx, ClientOf peer)
    : TlsPipe(std::move(server), std::move(inner), ctx, std::shared_ptr<void>()) {
    client_ = true;
    SSL_set_tlsext_host_name(tls_.native_handle(), peer.host.c_str());
    tls_.set_verify_callback(asio::ssl::host_name_verification(peer.host));
}

void TlsPipe::startClient(std::function<void(boost::system::error_code)> onReady) {
    beast::get_lowest_layer(tls_).expires_after(kHandshakeTimeout);
    tls_.async_handshake(asio::ssl::stream_base::client,
                         [self = shared_from_this(), onReady](beast::error_code ec) {
                             if (!ec && self->closed_) ec = asio::error::operation_aborted;
                             if (ec) {
                                 self->close();
                                 return onReady(ec);
                             }
                             beast::get_lowest_layer(self->tls_).expires_never();
                             self->clientToInner();
                             self->innerToClient();
                             onReady(ec);
                         });
}

void TlsPipe::arm(asio::steady_timer& timer, std::chrono::steady_clock::duration after) {
    timer.expires_after(after);
    timer.async_wait([self = shared_from_this()](beast::error_code ec) {
        if (!ec) self->close();
    });
}

void TlsPipe::start() {
    // A client that connects and says nothing holds a slot for 10 s at most.
    beast::get_lowest_layer(tls_).expires_after(kHandshakeTimeout);
    tls_.async_handshake(asio::ssl::stream_base::server,
                         [self = shared_from_this()](beast::error_code ec) {
                             if (ec) return self->close();
                             // From here the HttpSession's timeouts bound the
                             // client's silence (it closes its end, the pipe
                             // follows); the pipe's own bound its writes.
                             beast::get_lowest_layer(self->tls_).expires_never();
                             self->clientToInner();
                             self->innerToClient();
                         });
}

void TlsPipe::clientToInner() {
    tls_.async_read_some(asio::buffer(up_),
                         [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                             if (ec) {
                                 // The client is done sending: the session reads its end of
                                 // file, answers what it has, and closes its side.
                                 boost::system::error_code ignored;
                                 self->inner_.shutdown(asio::socket_base::shutdown_send, ignored);
                                 self->tlsDone_ = true;
                                 if (self->client_ && self->innerDone_) self->close();
                                 return;
                             }
                             asio::async_write(self->inner_, asio::buffer(self->up_.data(), n),
                                               [self](beast::error_code ec, std::size_t) {
                                                   if (ec) return self->close();
                                                   self->clientToInner();
                                               });
                         });
}

void TlsPipe::innerToClient() {
    inner_.async_read_some(
        asio::buffer(down_), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
            if (ec) {
                if (self->closed_) return;
                if (self->client_) {
                    self->innerDone_ = true;
                    boost::system::error_code ignored;
                    beast::get_lowest_layer(self->tls_)
                        .socket()
                        .shutdown(asio::socket_base::shutdown_send, ignored);
                    if (self->tlsDone_) self->close();
                    return;
                }
                // The session closed the connection: end TLS properly (a
                // close_notify), bounded in time, then close.
                self->arm(self->shutdownDeadline_, kShutdownTimeout);
                self->tls_.async_shutdown([self](beast::error_code) { self->close(); });
                return;
            }
            self->arm(self->writeDeadline_, kWriteTimeout);
            asio::async_write(self->tls_, asio::buffer(self->down_.data(), n),
                              [self](beast::error_code ec, std::size_t) {
                                  self->writeDeadline_.cancel();
                                  if (ec) return self->close();
                                  self->innerToClient();
                              });
        });
}

void TlsPipe::close() {
    if (closed_) return;
    closed_ = true;
    writeDeadline_.cancel();
    shutdownDeadline_.cancel();
    boost::system::error_code ignored;
    inner_.close(ignored);
    beast::get_lowest_layer(tls_).socket().close(ignored);
}

}  // namespace airlock::api

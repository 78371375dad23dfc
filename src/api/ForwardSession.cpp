#include "api/ForwardSession.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <sstream>

#include "api/ErrorMapping.hpp"
#include "api/StreamContext.hpp"
#include "api/TlsPipe.hpp"
#include "core/Log.hpp"

namespace airlock::api {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

ForwardSession::ForwardSession(beast::tcp_stream&& client, beast::flat_buffer&& buffer,
                               http::request<http::empty_body>&& head, Target target,
                               std::shared_ptr<void> slots)
    : client_(std::move(client)),
      owner_(client_.get_executor()),
      buffer_(std::move(buffer)),
      head_(std::move(head)),
      target_(std::move(target)),
      slots_(std::move(slots)),
      idleTimer_(client_.get_executor()),
      lastActivity_(std::chrono::steady_clock::now()) {}

namespace {
constexpr auto kIdleLimit = std::chrono::minutes(10);
}

void ForwardSession::watchIdle() {
    idleTimer_.expires_after(std::chrono::minutes(1));
    idleTimer_.async_wait([self = shared_from_this()](beast::error_code ec) {
        if (ec || self->finished_) return;
        if (std::chrono::steady_clock::now() - self->lastActivity_ > kIdleLimit) {
            logInfo("fleet", "a forwarded connection to node " + self->target_.node +
                                 " was idle for ten minutes: closed");
            return self->finish();
        }
        self->watchIdle();
    });
}

void ForwardSession::start() {
    // Only this node's signature says who calls: whatever the client sent
    // under the node headers' names goes, and so does its key once the
    // caller is signed in. A request whose credential is the owner's to
    // check (a preview's capability, an E2B access token) keeps it.
    for (const char* name : {"x-airlock-forwarded-by", "x-airlock-caller", "x-airlock-node-auth"})
        head_.erase(name);
    if (!target_.headers.empty()) {
        head_.erase(http::field::authorization);
        head_.erase("x-api-key");
        head_.erase("x-access-token");
    }
    for (const auto& [name, value] : target_.headers) head_.set(name, value);
    if (!beast::websocket::is_upgrade(head_)) head_.set(http::field::connection, "close");
    std::ostringstream headBytes;
    headBytes << head_.base();
    first_ = headBytes.str();
    // Body bytes (or frames) read along with the head go first.
    first_.append(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    buffer_.consume(buffer_.size());

    boost::system::error_code ec;
    tcp::resolver resolver(client_.get_executor());
    auto endpoints = resolver.resolve(target_.host, target_.port, ec);
    if (ec) return unavailable("cannot resolve " + target_.host + ": " + ec.message());
    owner_.expires_after(std::chrono::seconds(10));
    owner_.async_connect(endpoints,
                         [self = shared_from_this()](beast::error_code e, const tcp::endpoint&) {
                             self->onConnected(e);
                         });
}

void ForwardSession::onConnected(beast::error_code ec) {
    if (ec) return unavailable("cannot reach node " + target_.node + ": " + ec.message());
    if (!target_.tls) return sendHead();
    // The bytes below stay plain on a socket pair; the pipe speaks TLS to
    // the owner on the connection just made.
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
        return unavailable("no socket pair for TLS");
    asio::local::stream_protocol::socket pipeEnd(client_.get_executor());
    pipeEnd.assign(asio::local::stream_protocol(), fds[0], ec);
    if (ec) {
        ::close(fds[0]);
        ::close(fds[1]);
        return unavailable("no socket pair for TLS");
    }
    auto connection = owner_.release_socket();
    owner_.socket().assign(tcp::v4(), fds[1], ec);
    if (ec) {
        ::close(fds[1]);
        return unavailable("no socket pair for TLS");
    }
    ownerTls_ = std::make_shared<TlsPipe>(std::move(connection), std::move(pipeEnd), *target_.tls,
                                          TlsPipe::ClientOf{target_.host});
    ownerTls_->startClient([self = shared_from_this()](beast::error_code e) {
        if (self->finished_) return;
        if (e)
            return self->unavailable("TLS with node " + self->target_.node +
                                     " failed: " + e.message());
        self->sendHead();
    });
}

void ForwardSession::sendHead() {
    owner_.expires_after(std::chrono::seconds(30));
    asio::async_write(owner_, asio::buffer(first_),
                      [self = shared_from_this()](beast::error_code e, std::size_t) {
                          self->first_.clear();
                          if (e)
                              return self->unavailable("node " + self->target_.node +
                                                       " closed the connection: " + e.message());
                          self->owner_.expires_never();
                          self->client_.expires_never();
                          self->up_ = std::make_unique<Direction>();
                          self->up_->from = &self->client_;
                          self->up_->to = &self->owner_;
                          self->down_ = std::make_unique<Direction>();
                          self->down_->from = &self->owner_;
                          self->down_->to = &self->client_;
                          self->pump(*self->up_);
                          self->pump(*self->down_);
                          self->watchIdle();
                      });
}

void ForwardSession::pump(Direction& d) {
    d.from->socket().async_read_some(
        asio::buffer(d.buffer),
        [self = shared_from_this(), &d](beast::error_code ec, std::size_t n) {
            if (self->finished_) return;
            if (ec) {
                // The end of one direction: pass the half-close on; the
                // answer's end ends the whole.
                d.done = true;
                beast::error_code ignored;
                d.to->socket().shutdown(tcp::socket::shutdown_send, ignored);
                if (ec != asio::error::eof || &d == self->down_.get() ||
                    (self->up_->done && self->down_->done))
                    self->finish();
                return;
            }
            self->lastActivity_ = std::chrono::steady_clock::now();
            asio::async_write(*d.to, asio::buffer(d.buffer.data(), n),
                              [self, &d](beast::error_code e, std::size_t) {
                                  if (self->finished_) return;
                                  if (e) return self->finish();
                                  self->pump(d);
                              });
        });
}

void ForwardSession::unavailable(const std::string& why) {
    logWarn("fleet", "forwarding " + std::string(head_.method_string()) + " " +
                         std::string(head_.target()) + ": " + why);
    ApiResponse r =
        errorResponse(503, "node_unavailable", "node " + target_.node + " does not answer: " + why);
    r.headers["Retry-After"] = "5";
    finished_ = true;
    beast::error_code ignored;
    owner_.socket().close(ignored);
    if (ownerTls_) ownerTls_->close();
    writeSimpleResponse(client_, r, [self = shared_from_this()] {});
}

void ForwardSession::finish() {
    if (finished_) return;
    finished_ = true;
    idleTimer_.cancel();
    beast::error_code ignored;
    owner_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    owner_.socket().close(ignored);
    if (ownerTls_) ownerTls_->close();
    client_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    client_.socket().close(ignored);
}

}  // namespace airlock::api

#include "api/PreviewProxySession.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <sstream>

#include "api/ErrorMapping.hpp"
#include "core/Log.hpp"

namespace airlock::api {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using Kind = AgentStream::Event::Kind;

PreviewProxySession::PreviewProxySession(beast::tcp_stream&& stream, beast::flat_buffer&& buffer,
                                         http::request<http::empty_body>&& head,
                                         StreamContext context)
    : stream_(std::move(stream)),
      buffer_(std::move(buffer)),
      head_(std::move(head)),
      ctx_(std::move(context)) {
    readBuffer_.resize(64 * 1024);
}

PreviewProxySession::PreviewProxySession(beast::tcp_stream&& stream, beast::flat_buffer&& buffer,
                                         http::request<http::empty_body>&& head, StreamContext context,
                                         unsigned port, Opener open)
    : PreviewProxySession(std::move(stream), std::move(buffer), std::move(head), std::move(context)) {
    directPort_ = port;
    open_ = std::move(open);
}

void PreviewProxySession::start() {
    std::string portText;
    if (open_) {
        portText = std::to_string(directPort_);
        // Routing headers are airlockd's, not the guest's business.
        head_.erase("E2b-Sandbox-Id");
        head_.erase("E2b-Sandbox-Port");
        head_.erase("e2b-traffic-access-token");
    } else {
        // params: sandbox, port, token; the rest of the path goes to the guest.
        const auto& p = ctx_.params;
        portText = p[1];
        std::string prefix = "/preview/" + p[0] + "/" + p[1] + "/" + p[2];
        std::string target(head_.target());
        std::string rest = target.size() > prefix.size() ? target.substr(prefix.size()) : "/";
        if (rest.empty() || (rest[0] != '/' && rest[0] != '?')) rest = "/" + rest;
        if (rest[0] == '?') rest = "/" + rest;
        head_.target(rest);
    }
    bool upgrade = beast::websocket::is_upgrade(head_);
    if (!upgrade) head_.set(http::field::connection, "close");
    head_.set(http::field::host, "127.0.0.1:" + portText);
    // The guest is untrusted: the client's credentials for airlockd (an API
    // key, session cookies of this origin) never reach it.
    head_.erase(http::field::authorization);
    head_.erase(http::field::proxy_authorization);
    head_.erase(http::field::cookie);
    std::ostringstream headBytes;
    headBytes << head_.base();
    std::string first = headBytes.str();
    // Body bytes (or WebSocket frames) the header read already buffered.
    first.append(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    buffer_.consume(buffer_.size());

    asio::post(ctx_.workers, [self = shared_from_this(), first = std::move(first)]() mutable {
        ApiResponse error;
        std::shared_ptr<AgentStream> tunnel;
        try {
            AgentStream::Handler handler = [self](AgentStream::Event&& e) {
                asio::post(self->stream_.get_executor(), [self, e = std::move(e)]() mutable {
                    self->onTunnelEvent(std::move(e));
                });
            };
            if (self->open_) {
                tunnel = self->open_(std::move(handler));
            } else {
                unsigned port = 0;
                try {
                    port = static_cast<unsigned>(std::stoul(self->ctx_.params[1]));
                } catch (...) {
                    throw Error(ErrorCode::not_found, "no such preview");
                }
                tunnel = self->ctx_.controller.openPreviewTunnel(self->ctx_.params[0], port,
                                                                 self->ctx_.params[2], std::move(handler));
            }
            tunnel->writeAsync(0, std::move(first), false);  // within the initial window
        } catch (const Error& e) {
            error = errorResponse(e.code(), e.what());
            if (tunnel) tunnel->reset("cancelled", "proxy failed");
            tunnel.reset();
        }
        asio::post(self->stream_.get_executor(), [self, tunnel, error] {
            if (!tunnel) {
                self->ended_ = true;
                return writeSimpleResponse(self->stream_, error, [self] {});
            }
            self->tunnel_ = tunnel;
            if (self->ended_) return void(self->tunnel_.reset());
            if (self->ungranted_) tunnel->grant(std::exchange(self->ungranted_, 0));
            self->readFromClient();
        });
    });
}

void PreviewProxySession::onTunnelEvent(AgentStream::Event&& event) {
    if (ended_) return;
    if (event.kind == Kind::control) return;
    if (event.kind == Kind::reset && !writing_ && toClient_.empty()) {
        auto info = protocol::parseResetInfo(event.payload);
        // Nothing was answered yet: tell the browser why (502: nothing listens).
        ApiResponse r = info.code == "connection_refused"
                            ? errorResponse(502, "bad_gateway", info.message)
                            : errorResponse(ErrorCode::agent_error, info.message);
        ended_ = true;
        tunnel_.reset();
        return writeSimpleResponse(stream_, r, [self = shared_from_this()] {});
    }
    toClient_.push_back(std::move(event));
    pumpToClient();
}

void PreviewProxySession::pumpToClient() {
    if (writing_ || ended_ || toClient_.empty()) return;
    if (toClient_.front().kind != Kind::data) return finish();
    writing_ = true;
    stream_.expires_never();
    asio::async_write(stream_, asio::buffer(toClient_.front().payload),
                      [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                          self->writing_ = false;
                          if (ec) return self->finish();
                          self->toClient_.pop_front();
                          self->ungranted_ += n;
                          if (self->tunnel_)
                              self->tunnel_->grant(std::exchange(self->ungranted_, 0));
                          self->pumpToClient();
                      });
}

void PreviewProxySession::readFromClient() {
    if (ended_) return;
    stream_.socket().async_read_some(
        asio::buffer(readBuffer_),
        [self = shared_from_this()](beast::error_code ec, std::size_t n) {
            if (self->ended_) return;
            if (ec) {
                // Client finished sending (or left): half-close towards the guest.
                if (self->tunnel_) self->tunnel_->closeWrite();
                return;
            }
            self->sendToGuest(std::string(self->readBuffer_.data(), n));
        });
}

void PreviewProxySession::sendToGuest(std::string bytes) {
    if (!tunnel_) return finish();
    // As the guest's window allows; the client is read again once it went.
    tunnel_->writeAsync(0, std::move(bytes), false,
                        [self = shared_from_this()](std::exception_ptr error) {
                            asio::post(self->stream_.get_executor(), [self, ok = !error] {
                                if (!ok) return self->finish();
                                self->readFromClient();
                            });
                        });
}

void PreviewProxySession::finish() {
    if (ended_) return;
    ended_ = true;
    toClient_.clear();
    tunnel_.reset();
    beast::error_code ec;
    stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    stream_.close();
}

}  // namespace airlock::api

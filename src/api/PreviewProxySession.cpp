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
      ctx_(std::move(context)),
      pipe_(stream_.get_executor(), ctx_.workers) {
    readBuffer_.resize(64 * 1024);
    pipe_.onEvent([this](AgentStream::Event&& e) { onTunnelEvent(std::move(e)); });
    pipe_.setWriter([this](const AgentPipe::Chunk& c, std::function<void(bool)> done) {
        stream_.expires_never();
        asio::async_write(
            stream_, asio::buffer(c.bytes),
            [done = std::move(done)](beast::error_code ec, std::size_t) { done(!ec); });
    });
    pipe_.onEnd([this] { finish(); });
}

PreviewProxySession::PreviewProxySession(beast::tcp_stream&& stream, beast::flat_buffer&& buffer,
                                         http::request<http::empty_body>&& head,
                                         StreamContext context, unsigned port, Opener open)
    : PreviewProxySession(std::move(stream), std::move(buffer), std::move(head),
                          std::move(context)) {
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

    auto self = shared_from_this();
    auto opener = [this, first = std::move(first)](AgentStream::Handler handler) mutable {
        std::shared_ptr<AgentStream> tunnel;
        if (open_) {
            tunnel = open_(std::move(handler));
        } else {
            unsigned port = 0;
            try {
                port = static_cast<unsigned>(std::stoul(ctx_.params[1]));
            } catch (...) {
                throw Error(ErrorCode::not_found, "no such preview");
            }
            tunnel = ctx_.sandboxes.ports.openPreview(ctx_.params[0], port, ctx_.params[2],
                                                         std::move(handler));
        }
        try {
            tunnel->writeAsync(0, std::move(first), false);  // within the initial window
        } catch (...) {
            tunnel->reset("cancelled", "proxy failed");
            throw;
        }
        return tunnel;
    };
    pipe_.open(self, std::move(opener), [this, self](std::exception_ptr error) {
        if (error) {
            ended_ = true;
            pipe_.finish();
            return writeSimpleResponse(stream_, responseForError(error), [self] {});
        }
        readFromClient();
    });
}

void PreviewProxySession::onTunnelEvent(AgentStream::Event&& event) {
    if (ended_) return;
    if (event.kind == Kind::control) return;
    if (event.kind == Kind::reset && !pipe_.writing() && !pipe_.queued()) {
        auto info = protocol::parseResetInfo(event.payload);
        // Nothing was answered yet: tell the browser why (502: nothing listens).
        ApiResponse r = info.code == "connection_refused"
                            ? errorResponse(502, "bad_gateway", info.message)
                            : errorResponse(ErrorCode::agent_error, info.message);
        ended_ = true;
        pipe_.finish();
        return writeSimpleResponse(stream_, r, [self = shared_from_this()] {});
    }
    AgentPipe::Chunk chunk;
    chunk.end = event.kind != Kind::data;
    chunk.credit = event.payload.size();
    chunk.bytes = std::move(event.payload);
    pipe_.send(shared_from_this(), std::move(chunk));
}

void PreviewProxySession::readFromClient() {
    if (ended_) return;
    stream_.socket().async_read_some(
        asio::buffer(readBuffer_),
        [self = shared_from_this()](beast::error_code ec, std::size_t n) {
            if (self->ended_) return;
            if (ec) {
                // Client finished sending (or left): half-close towards the guest.
                if (auto* tunnel = self->pipe_.stream()) tunnel->closeWrite();
                return;
            }
            self->sendToGuest(std::string(self->readBuffer_.data(), n));
        });
}

void PreviewProxySession::sendToGuest(std::string bytes) {
    auto* tunnel = pipe_.stream();
    if (!tunnel) return finish();
    // As the guest's window allows; the client is read again once it went.
    tunnel->writeAsync(0, std::move(bytes), false,
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
    pipe_.finish();
    beast::error_code ec;
    stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    stream_.close();
}

}  // namespace airlock::api

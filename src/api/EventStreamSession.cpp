#include "api/EventStreamSession.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "api/RequestParsing.hpp"

namespace airlock::api {
namespace beast = boost::beast;
namespace asio = boost::asio;

EventStreamSession::EventStreamSession(beast::tcp_stream&& stream, StreamContext context,
                                       EventFeed& feed, Source source,
                                       std::optional<std::int64_t> cursor)
    : stream_(std::move(stream)),
      ctx_(std::move(context)),
      feed_(feed),
      source_(std::move(source)),
      cursor_(cursor),
      keepalive_(stream_.get_executor()) {}

std::string EventStreamSession::render(const AuditEvent& e) {
    std::string type;
    for (char ch : e.type)
        if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '.')
            type += ch;
    auto data = auditEventJson(e);
    data["tenant"] = e.tenant;
    // dump() escapes every control character: the data is one line.
    return "id: " + std::to_string(e.seq) + "\nevent: " + (type.empty() ? "audit" : type) +
           "\ndata: " + data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
           "\n\n";
}

void EventStreamSession::start() {
    std::weak_ptr<EventStreamSession> weak = shared_from_this();
    subscription_ = feed_.subscribe([weak] {
        if (auto self = weak.lock())
            asio::post(self->stream_.get_executor(), [self] { self->wake(); });
    });
    // The client's reads are watched with no deadline; writes get their own.
    stream_.expires_never();
    watchClient();
    static const std::string kHeader =
        "HTTP/1.1 200 OK\r\nServer: airlockd\r\nContent-Type: text/event-stream\r\n"
        "Cache-Control: no-store\r\nX-Accel-Buffering: no\r\nConnection: close\r\n\r\n"
        "retry: 3000\n\n";
    write(kHeader, true);
}

void EventStreamSession::watchClient() {
    stream_.async_read_some(asio::buffer(clientBytes_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                // A client says nothing after its request: its end, or
                                // anything it sends, ends the stream.
                                (void)ec;
                                self->finish();
                            });
}

void EventStreamSession::fetch() {
    if (ended_ || fetching_) return;
    fetching_ = true;
    woken_ = false;
    asio::post(ctx_.workers, [self = shared_from_this(), cursor = cursor_] {
        bool allowed = false;
        std::vector<AuditEvent> events;
        std::optional<std::int64_t> at = cursor;
        try {
            allowed = self->source_.allowed();
            if (allowed) {
                if (!at) at = self->source_.head();
                events = self->source_.read(*at, kBatch);
            }
        } catch (...) {
            allowed = false;
        }
        asio::post(self->stream_.get_executor(),
                   [self, allowed, at, events = std::move(events)]() mutable {
                       if (at && !self->cursor_) self->cursor_ = at;
                       self->onBatch(allowed, std::move(events));
                   });
    });
}

void EventStreamSession::onBatch(bool allowed, std::vector<AuditEvent> events) {
    fetching_ = false;
    if (ended_) return;
    if (!allowed) return finish();
    if (events.empty()) {
        if (woken_) return fetch();
        return wait();
    }
    cursor_ = events.back().seq;
    std::string text;
    for (const auto& e : events) text += render(e);
    write(std::move(text), events.size() == static_cast<std::size_t>(kBatch));
}

void EventStreamSession::write(std::string text, bool more) {
    if (ended_) return;
    out_ = std::move(text);
    stream_.expires_after(std::chrono::seconds(60));
    asio::async_write(stream_, asio::buffer(out_),
                      [self = shared_from_this(), more](beast::error_code ec, std::size_t) {
                          if (ec) return self->finish();
                          if (more || self->woken_) return self->fetch();
                          self->wait();
                      });
}

void EventStreamSession::wait() {
    if (ended_) return;
    waiting_ = true;
    keepalive_.expires_after(kKeepalive);
    keepalive_.async_wait([self = shared_from_this()](beast::error_code ec) {
        if (ec || !self->waiting_ || self->ended_) return;
        self->waiting_ = false;
        // The keepalive's write is followed by a read: the caller is checked again.
        self->write(": keepalive\n\n", true);
    });
}

void EventStreamSession::wake() {
    if (ended_) return;
    if (waiting_) {
        waiting_ = false;
        keepalive_.cancel();
        return fetch();
    }
    woken_ = true;  // read again once the batch under way is written
}

void EventStreamSession::finish() {
    if (ended_) return;
    ended_ = true;
    waiting_ = false;
    subscription_.reset();
    keepalive_.cancel();
    beast::error_code ec;
    stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    stream_.close();
}

}  // namespace airlock::api

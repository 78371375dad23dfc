#include "api/ConnectStreamSession.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>

#include "e2b/ConnectEnvelope.hpp"
#include "protocol/JsonText.hpp"

namespace airlock::api {
namespace asio = boost::asio;
namespace beast = boost::beast;

namespace {
std::string chunk(const std::string& data) {
    char size[20];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    return size + data + "\r\n";
}
}  // namespace

ConnectStreamSession::ConnectStreamSession(beast::tcp_stream&& stream,
                                           std::chrono::seconds keepalive,
                                           std::string keepaliveJson, std::shared_ptr<void> slots,
                                           asio::thread_pool& workers, Framing framing,
                                           std::string extraHeaders)
    : stream_(std::move(stream)),
      keepalive_(keepalive),
      keepaliveJson_(std::move(keepaliveJson)),
      framing_(framing),
      extraHeaders_(std::move(extraHeaders)),
      slots_(std::move(slots)),
      keepaliveTimer_(stream_.get_executor()),
      deadlineTimer_(stream_.get_executor()),
      pipe_(stream_.get_executor(), workers) {}

void ConnectStreamSession::start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
        self->stream_.expires_never();
        self->pipe_.setWriter([raw = self.get()](const AgentPipe::Chunk& chunk,
                                                 std::function<void(bool)> done) {
            // A client that takes nothing for a minute is gone.
            raw->stream_.expires_after(std::chrono::seconds(60));
            asio::async_write(
                raw->stream_, asio::buffer(chunk.bytes),
                asio::bind_executor(
                    raw->stream_.get_executor(),
                    [self = raw->shared_from_this(), done = std::move(done),
                     n = chunk.bytes.size()](beast::error_code ec, std::size_t) {
                        if (self->over_) return done(false);
                        self->stream_.expires_never();
                        self->queuedBytes_ -= n;
                        if (ec) {
                            done(false);
                            return self->finish(false);
                        }
                        self->lastWrite_ = std::chrono::steady_clock::now();
                        done(true);
                    }));
        });
        self->pipe_.onEnd([raw = self.get()] { raw->finish(true); });
        self->enqueue(std::string("HTTP/1.1 200 OK\r\nServer: airlockd\r\nContent-Type: ") +
                      (self->framing_ == Framing::sse
                           ? "text/event-stream\r\nCache-Control: no-cache, no-transform\r\n"
                             "X-Accel-Buffering: no\r\n"
                       : self->framing_ == Framing::text
                           ? "text/plain; charset=utf-8\r\nCache-Control: no-store\r\n"
                             "X-Accel-Buffering: no\r\n"
                           : "application/connect+json\r\nCache-Control: no-store\r\n") +
                      self->extraHeaders_ +
                      "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
        self->lastWrite_ = std::chrono::steady_clock::now();
        self->armKeepalive();
        if (self->deadline_) {
            self->deadlineTimer_.expires_after(*self->deadline_);
            self->deadlineTimer_.async_wait([self](beast::error_code ec) {
                if (!ec)
                    self->end(Error{"deadline_exceeded", "the stream's Connect-Timeout-Ms passed"});
            });
        }
        self->readClient();
    });
}

void ConnectStreamSession::onGone(std::function<void()> f) {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this(), f = std::move(f)]() mutable {
        if (self->over_) return f();
        self->onGone_ = std::move(f);
    });
}

std::string ConnectStreamSession::frame(const std::string& messageJson) const {
    if (framing_ == Framing::sse) return chunk("data: " + messageJson + "\n\n");
    if (framing_ == Framing::text) return messageJson.empty() ? std::string() : chunk(messageJson);
    return chunk(e2b::encodeEnvelope(e2b::kEnvelopeMessage, messageJson));
}

bool ConnectStreamSession::push(std::string messageJson, std::shared_ptr<void> hold) {
    std::string bytes = frame(messageJson);
    // Counted before the post: a burst from the source cannot outrun the cap.
    if (pendingBytes_.fetch_add(bytes.size()) + bytes.size() > kMaxQueuedBytes) {
        pendingBytes_.fetch_sub(bytes.size());
        cut();
        return false;
    }
    asio::post(stream_.get_executor(), [self = shared_from_this(), bytes = std::move(bytes),
                                        hold = std::move(hold)]() mutable {
        self->pendingBytes_.fetch_sub(bytes.size());
        if (self->over_ || self->ending_) return;
        self->enqueue(std::move(bytes), std::move(hold));
    });
    return true;
}

void ConnectStreamSession::end(std::optional<Error> error) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), error] {
        if (self->over_ || self->ending_) return;
        if (self->framing_ != Framing::connect) {
            self->enqueue("0\r\n\r\n");
        } else {
            nlohmann::json j = nlohmann::json::object();
            if (error) j["error"] = {{"code", error->first}, {"message", error->second}};
            self->enqueue(chunk(e2b::encodeEnvelope(e2b::kEnvelopeEndStream, jsonText(j))) +
                          "0\r\n\r\n");
        }
        if (self->over_) return;
        AgentPipe::Chunk last;
        last.end = true;  // written up to here: the session ends cleanly
        self->pipe_.send(self, std::move(last));
        self->ending_ = true;
        self->keepaliveTimer_.cancel();
        self->deadlineTimer_.cancel();
    });
}

void ConnectStreamSession::cut() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] { self->finish(false); });
}

void ConnectStreamSession::enqueue(std::string bytes, std::shared_ptr<void> hold) {
    queuedBytes_ += bytes.size();
    if (queuedBytes_ > kMaxQueuedBytes) return finish(false);
    AgentPipe::Chunk c;
    c.bytes = std::move(bytes);
    c.hold = std::move(hold);
    pipe_.send(shared_from_this(), std::move(c));
}

void ConnectStreamSession::readClient() {
    // The request was read whole: anything now is the client leaving.
    stream_.socket().async_read_some(
        asio::buffer(readByte_),
        asio::bind_executor(stream_.get_executor(),
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                if (self->over_) return;
                                if (ec) return self->finish(false);
                                self->readClient();
                            }));
}

void ConnectStreamSession::armKeepalive() {
    if (keepalive_.count() <= 0) return;
    keepaliveTimer_.expires_after(keepalive_);
    keepaliveTimer_.async_wait([self = shared_from_this()](beast::error_code ec) {
        if (ec || self->over_ || self->ending_) return;
        if (std::chrono::steady_clock::now() - self->lastWrite_ >= self->keepalive_ &&
            !self->pipe_.writing() && !self->pipe_.queued())
            self->enqueue(self->framing_ == Framing::sse ? chunk(": keepalive\n\n")
                                                         : self->frame(self->keepaliveJson_));
        self->armKeepalive();
    });
}

void ConnectStreamSession::finish(bool clean) {
    if (over_) return;
    over_ = true;
    keepaliveTimer_.cancel();
    deadlineTimer_.cancel();
    beast::error_code ec;
    if (clean) {
        stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    } else {
        // Cut: a reset, so the client sees the stream break, not end.
        stream_.socket().set_option(asio::socket_base::linger(true, 0), ec);
    }
    stream_.socket().close(ec);
    pipe_.finish();  // what was queued goes, and the windows it held
    queuedBytes_ = 0;
    if (auto f = std::move(onGone_)) f();
    slots_.reset();
}

}  // namespace airlock::api

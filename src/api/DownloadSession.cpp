#include "api/DownloadSession.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "api/ErrorMapping.hpp"

namespace airlock::api {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using Kind = AgentStream::Event::Kind;

DownloadSession::DownloadSession(beast::tcp_stream&& stream, StreamContext context, Opener opener,
                                 bool sized, std::string contentType)
    : stream_(std::move(stream)),
      ctx_(std::move(context)),
      opener_(std::move(opener)),
      sized_(sized),
      contentType_(std::move(contentType)) {}

void DownloadSession::start() {
    asio::post(ctx_.workers, [self = shared_from_this()] {
        ApiResponse error;
        std::shared_ptr<AgentStream> agent;
        try {
            agent = self->opener_([self](AgentStream::Event&& e) {
                asio::post(self->stream_.get_executor(),
                           [self, e = std::move(e)]() mutable { self->onEvent(std::move(e)); });
            });
        } catch (const Error& e) {
            error = errorResponse(e.code(), e.what());
        } catch (const std::exception& e) {
            error = errorResponse(ErrorCode::internal, e.what());
        }
        asio::post(self->stream_.get_executor(), [self, agent, error] {
            if (!agent) return self->fail(error);
            self->agent_ = agent;
            if (self->ended_) return void(self->agent_.reset());
            if (self->ungranted_) agent->grant(std::exchange(self->ungranted_, 0));
            if (!self->sized_) self->writeHeader(std::nullopt);
            self->pump();
        });
    });
}

void DownloadSession::fail(const ApiResponse& response) {
    if (ended_) return;  // answered once: a second response would interleave on the wire
    ended_ = true;
    agent_.reset();
    queue_.clear();
    writeSimpleResponse(stream_, response, [self = shared_from_this()] {});
}

void DownloadSession::onEvent(AgentStream::Event&& event) {
    if (ended_) return;
    if (!headerSent_ && event.kind == Kind::reset) {
        auto info = protocol::parseResetInfo(event.payload);
        Error e = agentError(info.code, info.message);
        return fail(errorResponse(e.code(), e.what()));
    }
    if (!headerSent_ && sized_ && event.kind == Kind::control) {
        auto j = nlohmann::json::parse(event.payload, nullptr, false);
        if (j.is_object() && j.contains("size") && j["size"].is_number_unsigned())
            writeHeader(j["size"].get<std::uint64_t>());
        return;
    }
    if (event.kind == Kind::control) return;
    queue_.push_back(std::move(event));
    pump();
}

void DownloadSession::writeHeader(std::optional<std::uint64_t> length) {
    headerSent_ = true;
    header_ = std::make_shared<http::response<http::empty_body>>(http::status::ok, 11);
    header_->set(http::field::server, "airlockd");
    header_->set(http::field::content_type, contentType_);
    header_->set(http::field::cache_control, "no-store");
    if (length) header_->content_length(*length);
    // The announced length is what the client gets: a file that grows while
    // it is read is cut there, so the response stays well-formed HTTP.
    remaining_ = length;
    header_->keep_alive(false);
    serializer_ = std::make_shared<http::response_serializer<http::empty_body>>(*header_);
    writing_ = true;
    stream_.expires_after(std::chrono::seconds(60));
    http::async_write_header(stream_, *serializer_,
                             [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                 self->writing_ = false;
                                 if (ec) return self->finish();
                                 self->pump();
                             });
}

void DownloadSession::pump() {
    if (writing_ || ended_ || !headerSent_ || queue_.empty()) return;
    AgentStream::Event& e = queue_.front();
    if (e.kind != Kind::data) {
        // close: everything was sent; reset mid-body: the client sees a short body.
        return finish();
    }
    if (remaining_ && *remaining_ == 0) return finish();
    std::size_t size = e.payload.size();
    if (remaining_) size = static_cast<std::size_t>(std::min<std::uint64_t>(size, *remaining_));
    writing_ = true;
    stream_.expires_after(std::chrono::seconds(60));
    asio::async_write(
        stream_, asio::buffer(e.payload.data(), size),
        [self = shared_from_this()](beast::error_code ec, std::size_t n) {
            self->writing_ = false;
            if (ec)
                return self->finish();  // the client went away: dropping agent_ cancels the stream
            if (self->remaining_) *self->remaining_ -= n;
            n = self->queue_.front().payload.size();  // the window covers the whole chunk
            self->queue_.pop_front();
            // The first chunks may be written before the opener's result reached
            // the strand: keep their window until it did.
            self->ungranted_ += n;
            if (self->agent_) self->agent_->grant(std::exchange(self->ungranted_, 0));
            self->pump();
        });
}

void DownloadSession::finish() {
    if (ended_) return;
    ended_ = true;
    queue_.clear();
    agent_.reset();  // breaks the handler's reference cycle; a live stream is cancelled
    beast::error_code ec;
    stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
    stream_.close();
}

}  // namespace airlock::api

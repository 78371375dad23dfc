#include "api/DownloadSession.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "api/ErrorMapping.hpp"
#include "controller/GuestAnswers.hpp"
#include "protocol/GuestResults.hpp"

namespace airlock::api {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using Kind = AgentStream::Event::Kind;

DownloadSession::DownloadSession(beast::tcp_stream&& stream, StreamContext context, Opener opener,
                                 bool sized, std::string contentType,
                                 std::chrono::milliseconds idle)
    : stream_(std::move(stream)),
      ctx_(std::move(context)),
      opener_(std::move(opener)),
      sized_(sized),
      contentType_(std::move(contentType)),
      idle_(idle),
      pipe_(stream_.get_executor(), ctx_.workers) {
    pipe_.onEvent([this](AgentStream::Event&& e) { onEvent(std::move(e)); });
    pipe_.setWriter([this](const AgentPipe::Chunk& c, std::function<void(bool)> done) {
        writeChunk(c, std::move(done));
    });
    // close: everything was sent; reset mid-body: the client sees a short body.
    pipe_.onEnd([this] { finish(); });
}

void DownloadSession::start() {
    auto self = shared_from_this();
    if (idle_.count() == 0) watchClient();
    pipe_.open(self, opener_, [this, self](std::exception_ptr error) {
        if (error) return fail(responseForError(error));
        pipe_.idleAfter(self, idle_, [this] {
            if (!headerSent_)
                return fail(errorResponse(
                    ErrorCode::agent_timeout,
                    "the agent sent nothing for " + std::to_string(idle_.count() / 1000) + " s"));
            finish();  // the client sees a short body
        });
        if (!sized_) writeHeader(std::nullopt);
    });
}

void DownloadSession::watchClient() {
    // On the socket itself, not the stream: the stream's write deadline must
    // not time out a read that waits as long as the body rests.
    stream_.socket().async_read_some(
        asio::buffer(clientBytes_),
        [this, self = shared_from_this()](beast::error_code ec, std::size_t n) {
            if (ended_) return;
            if (ec == asio::error::eof) {
                // Done sending, or gone: the two look alike while the body
                // rests. A client that only half-closed still reads, so the
                // body goes on while the guest sends, and ends once it has
                // rested for a file's idle time.
                return pipe_.idleAfter(self, kFileIdle, [this] { finish(); });
            }
            if (ec) return finish();
            // A GET has no body, and nothing pipelined is answered
            // (Connection: close): a client that keeps sending is cut off.
            clientBytesRead_ += n;
            if (clientBytesRead_ > kMaxClientBytes) return finish();
            watchClient();
        });
}

void DownloadSession::fail(const ApiResponse& response) {
    if (ended_) return;  // answered once: a second response would interleave on the wire
    ended_ = true;
    pipe_.finish();
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
        std::uint64_t size = 0;
        try {
            size = protocol::parseFileSize(event.payload).size;
        } catch (const protocol::MessageError& e) {
            Error error = guestAnswerError(e);
            return fail(errorResponse(error.code(), error.what()));
        }
        return writeHeader(size);
    }
    if (event.kind == Kind::control) return;
    // The size comes first: anything else before it is a guest breaking the
    // stream's contract, and nothing could ever send what waited for it.
    if (!headerSent_ && sized_)
        return fail(
            errorResponse(ErrorCode::agent_error, "the agent sent the file before its size"));
    AgentPipe::Chunk chunk;
    chunk.end = event.kind != Kind::data;
    chunk.credit = event.payload.size();  // the window covers the whole chunk
    chunk.bytes = std::move(event.payload);
    if (deflater_) {
        if (gzipEnded_) return;  // the announced size was sent: the rest is not read
        // An end chunk's bytes are never written (they are the close's): the
        // trailer goes in a chunk of its own before it.
        bool endNow = chunk.end;
        try {
            if (!chunk.end) {
                if (rawRemaining_) {
                    if (chunk.bytes.size() > *rawRemaining_) chunk.bytes.resize(*rawRemaining_);
                    *rawRemaining_ -= chunk.bytes.size();
                }
                chunk.bytes = deflater_->add(chunk.bytes);
                // A file that grows while it is read ends at its announced size,
                // as the unencoded body does.
                if (rawRemaining_ && *rawRemaining_ == 0) {
                    chunk.bytes += deflater_->finish();
                    endNow = true;
                }
            } else {
                // A close ends the gzip stream, unless the file came up short
                // of its size; a reset leaves it cut, which the client's
                // decoder reports (the unencoded body's short length does).
                bool whole = event.kind == Kind::close && (!rawRemaining_ || *rawRemaining_ == 0);
                chunk.end = false;
                chunk.bytes = whole ? deflater_->finish() : std::string();
            }
        } catch (const Error&) {
            return finish();
        }
        if (endNow) {
            gzipEnded_ = true;
            AgentPipe::Chunk last;
            last.end = true;
            if (!headerSent_) {
                beforeHeader_.push_back(std::move(chunk));
                return beforeHeader_.push_back(std::move(last));
            }
            pipe_.send(shared_from_this(), std::move(chunk));
            return pipe_.send(shared_from_this(), std::move(last));
        }
    }
    if (!headerSent_) return beforeHeader_.push_back(std::move(chunk));
    pipe_.send(shared_from_this(), std::move(chunk));
}

void DownloadSession::writeHeader(std::optional<std::uint64_t> length) {
    headerSent_ = true;
    header_ = std::make_shared<http::response<http::empty_body>>(http::status::ok, 11);
    header_->set(http::field::server, "airlockd");
    header_->set(http::field::content_type, contentType_);
    header_->set(http::field::cache_control, "no-store");
    if (deflater_) {
        header_->set(http::field::content_encoding, "gzip");
        rawRemaining_ = length;
        length.reset();
    }
    if (length) header_->content_length(*length);
    // The announced length is what the client gets: a file that grows while
    // it is read is cut there, so the response stays well-formed HTTP.
    remaining_ = length;
    header_->keep_alive(false);
    serializer_ = std::make_shared<http::response_serializer<http::empty_body>>(*header_);
    // The header goes first, as the queue's first chunk (nothing to grant).
    auto self = shared_from_this();
    pipe_.send(self, AgentPipe::Chunk{});
    for (auto& c : beforeHeader_) pipe_.send(self, std::move(c));
    beforeHeader_.clear();
}

void DownloadSession::writeChunk(const AgentPipe::Chunk& c, std::function<void(bool)> done) {
    stream_.expires_after(std::chrono::seconds(60));
    if (serializer_ && !serializer_->is_header_done()) {
        return http::async_write_header(
            stream_, *serializer_,
            [done = std::move(done)](beast::error_code ec, std::size_t) { done(!ec); });
    }
    if (remaining_ && *remaining_ == 0) return finish();
    std::size_t size = c.bytes.size();
    if (remaining_) size = static_cast<std::size_t>(std::min<std::uint64_t>(size, *remaining_));
    asio::async_write(stream_, asio::buffer(c.bytes.data(), size),
                      [this, done = std::move(done)](beast::error_code ec, std::size_t n) {
                          // The client went away: the pipe drops (cancels) the stream.
                          if (!ec && remaining_) *remaining_ -= n;
                          if (ec) finish();
                          done(!ec);
                      });
}

void DownloadSession::finish() {
    if (ended_) return;
    ended_ = true;
    pipe_.finish();
    beast::error_code ec;
    stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
    stream_.close();
}

}  // namespace airlock::api

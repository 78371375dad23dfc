#include "api/UploadSession.hpp"

#include <boost/asio/post.hpp>
#include <limits>

#include "api/ErrorMapping.hpp"
#include "controller/GuestAnswers.hpp"
#include "core/Log.hpp"
#include "protocol/GuestResults.hpp"
#include "protocol/JsonText.hpp"

namespace airlock::api {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using nlohmann::json;

namespace {
constexpr std::size_t kChunk = 256 * 1024;
constexpr auto kAgentWait = std::chrono::seconds(60);
}  // namespace

UploadSession::UploadSession(beast::tcp_stream&& stream, beast::flat_buffer&& buffer,
                             http::request_parser<http::empty_body>&& header, StreamContext context)
    : stream_(std::move(stream)),
      buffer_(std::move(buffer)),
      parser_(std::move(header)),
      ctx_(std::move(context)),
      pipe_(stream_.get_executor(), ctx_.workers),
      waitTimer_(stream_.get_executor()) {
    // The guest's answer (or its refusal mid-way) arrives on the strand.
    pipe_.onEvent([this](AgentStream::Event&& e) { onAgentEvent(std::move(e)); });
    parser_.body_limit(
        std::numeric_limits<std::uint64_t>::max());  // streamed: the size is not bounded by memory
    chunk_.resize(kChunk);
}

void UploadSession::fail(const ApiResponse& response) {
    if (ended_) return;
    ended_ = true;
    waitTimer_.cancel();
    if (auto* agent = pipe_.stream()) agent->reset("cancelled", "upload failed");
    pipe_.finish();
    writeSimpleResponse(stream_, response, [self = shared_from_this()] {});
}

void UploadSession::start() {
    std::string path = ctx_.request.query.count("path") ? ctx_.request.query.at("path") : "";
    std::optional<unsigned> mode;
    if (auto m = ctx_.request.query.find("mode"); m != ctx_.request.query.end()) {
        try {
            std::size_t used = 0;
            unsigned long v = std::stoul(m->second, &used, 8);
            if (used != m->second.size() || v > 07777) throw std::invalid_argument("mode");
            mode = static_cast<unsigned>(v);
        } catch (const std::exception&) {
            return fail(errorResponse(ErrorCode::bad_request, "mode must be octal, e.g. 0644"));
        }
    }
    path_ = path;
    auto self = shared_from_this();
    pipe_.open(
        self,
        [this, path, mode](AgentStream::Handler handler) {
            return ctx_.controller.files().openUpload(ctx_.tenant, ctx_.params[0], path, mode,
                                                      std::move(handler));
        },
        [this, self](std::exception_ptr error) {
            if (error) return fail(responseForError(error));
            readChunk();
        });
}

void UploadSession::readChunk() {
    if (ended_) return;
    if (parser_.is_done()) return finishUpload();
    parser_.get().body().data = chunk_.data();
    parser_.get().body().size = chunk_.size();
    stream_.expires_after(std::chrono::seconds(60));
    http::async_read(
        stream_, buffer_, parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->onChunk(ec); });
}

void UploadSession::onChunk(beast::error_code ec) {
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
        if (ended_) return;
        // The client went away mid-upload: the agent discards the partial file.
        logWarn("api", "upload aborted: " + ec.message());
        ended_ = true;
        waitTimer_.cancel();
        if (auto* agent = pipe_.stream()) agent->reset("cancelled", "client went away");
        pipe_.finish();
        return;
    }
    // The guest may have refused the file while this read was pending (the
    // body was often in the buffer already): the session is over, and
    // its stream is gone with it.
    if (ended_) return;
    std::size_t n = chunk_.size() - parser_.get().body().size;
    received_ += n;
    if (n == 0) return readChunk();
    hash_.update(std::string_view(chunk_.data(), n));
    // No thread waits for the guest's window: the next chunk is read once
    // this one is on its way (backpressure to the client), or the upload
    // fails if the guest takes none of it for kAgentWait.
    waitTimer_.expires_after(kAgentWait);
    waitTimer_.async_wait([self = shared_from_this()](beast::error_code ec) {
        if (auto* agent = self->pipe_.stream(); !ec && agent)
            agent->reset("cancelled", "the guest took no data for a minute");
    });
    pipe_.stream()->writeAsync(
        0, std::string(chunk_.data(), n), false,
        [self = shared_from_this()](std::exception_ptr error) {
            asio::post(self->stream_.get_executor(), [self, error] {
                self->waitTimer_.cancel();
                if (self->ended_) return;
                if (error) {
                    // The guest's reset says why (403, 404...) and may
                    // be right behind this failure on the strand: it
                    // answers first if it comes within a moment.
                    self->waitTimer_.expires_after(std::chrono::seconds(2));
                    self->waitTimer_.async_wait([self, error](beast::error_code ec) {
                        if (!ec && !self->ended_) self->fail(responseForError(error));
                    });
                    return;
                }
                self->readChunk();
            });
        });
}

void UploadSession::finishUpload() {
    // Every byte is on its way: the guest's close (or reset) answers; no
    // thread waits for it, a timer bounds it.
    finishing_ = true;
    pipe_.stream()->closeWrite();
    waitTimer_.expires_after(kAgentWait);
    waitTimer_.async_wait([self = shared_from_this()](beast::error_code ec) {
        if (!ec)
            self->fail(
                errorResponse(ErrorCode::agent_timeout, "the agent did not confirm the upload"));
    });
}

void UploadSession::onAgentEvent(AgentStream::Event&& e) {
    if (ended_) return;
    if (e.kind == AgentStream::Event::Kind::reset) {
        auto info = protocol::parseResetInfo(e.payload);
        Error error = agentError(info.code, info.message);
        return fail(errorResponse(error.code(), error.what()));
    }
    if (e.kind != AgentStream::Event::Kind::close) return;
    if (!finishing_)
        return fail(errorResponse(ErrorCode::agent_error, "the agent ended the upload early"));
    ended_ = true;
    waitTimer_.cancel();
    pipe_.finish();
    std::string sha = hash_.hexDigest();
    // The guest's word, read as file_write's typed result: a malformed one
    // is a 502, never an unknown shape in a 201. Either way every byte
    // reached the guest, which may have written them: the write is audited.
    std::string written = path_;
    ApiResponse response;
    try {
        auto confirmed = protocol::parseWrittenFile(e.payload);
        json j = protocol::toJsonValue(confirmed);
        j["bytes_received"] = received_;
        j["sha256"] = sha;
        // The path the guest resolved ("..", symlinks) is what was written;
        // it is its own word, kept beside the asked one.
        written = confirmed.path;
        response = ApiResponse{201, "application/json", jsonText(j) + "\n"};
    } catch (const protocol::MessageError& bad) {
        Error error = guestAnswerError(bad);
        response = errorResponse(error.code(), error.what());
    }
    // The audit write (SQLite) is not for the I/O thread.
    asio::post(ctx_.workers, [self = shared_from_this(), written, sha, response] {
        try {
            self->ctx_.controller.files().recordFileWrite(self->ctx_.tenant, self->ctx_.params[0],
                                                          self->path_, written, self->received_,
                                                          sha);
        } catch (const std::exception&) {
        }
        asio::post(self->stream_.get_executor(),
                   [self, response] { writeSimpleResponse(self->stream_, response, [self] {}); });
    });
}

}  // namespace airlock::api

#include "api/ClientStreamSession.hpp"

#include <boost/asio/post.hpp>
#include <limits>

#include "core/Error.hpp"
#include "core/Log.hpp"
#include "e2b/ConnectEnvelope.hpp"
#include "e2b/E2bWire.hpp"
#include "protocol/JsonText.hpp"

namespace airlock::api {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using nlohmann::json;

namespace {
constexpr std::size_t kReadChunk = 64 * 1024;
constexpr std::size_t kEnvelopeHeader = e2b::kEnvelopeHeaderSize;
// A client that sends nothing for this long is gone (SDKs send keepalives).
constexpr auto kClientIdle = std::chrono::seconds(120);
}  // namespace

ClientStreamSession::ClientStreamSession(beast::tcp_stream&& stream, beast::flat_buffer&& buffer,
                                         http::request_parser<http::empty_body>&& header,
                                         StreamContext context, ClientStreamPlan plan)
    : stream_(std::move(stream)),
      buffer_(std::move(buffer)),
      parser_(std::move(header)),
      ctx_(std::move(context)),
      plan_(std::move(plan)) {
    // Streamed: what bounds memory is the envelope, not the body.
    parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
    chunk_.resize(kReadChunk);
}

std::string ClientStreamSession::answerBody(const json& message) {
    return e2b::encodeEnvelope(e2b::kEnvelopeMessage, jsonText(message)) +
           e2b::encodeEnvelope(e2b::kEnvelopeEndStream, "{}");
}

std::string ClientStreamSession::errorBody(const ErrorStatus& error) {
    json end{{"error",
              {{"code", e2b::connectCodeFor(error.code)}, {"message", error.message}}}};
    return e2b::encodeEnvelope(e2b::kEnvelopeEndStream, jsonText(end));
}

void ClientStreamSession::start() { nextMessage(); }

void ClientStreamSession::answer(std::string body) {
    ended_ = true;
    writeSimpleResponse(stream_, ApiResponse{200, "application/connect+json", std::move(body)},
                        [self = shared_from_this()] {});
}

void ClientStreamSession::fail(const ErrorStatus& error) {
    if (ended_) return;
    answer(errorBody(error));
}

void ClientStreamSession::fail(std::exception_ptr error) {
    fail(errorStatusFor(error, ctx_.request));
}

void ClientStreamSession::readChunk() {
    if (ended_) return;
    if (parser_.is_done()) {
        bodyDone_ = true;
        return nextMessage();
    }
    parser_.get().body().data = chunk_.data();
    parser_.get().body().size = chunk_.size();
    stream_.expires_after(kClientIdle);
    // read_some: back after whatever arrived, not once the buffer is full
    // (an event is delivered while the client's body is still open).
    http::async_read_some(
        stream_, buffer_, parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->onChunk(ec); });
}

void ClientStreamSession::onChunk(beast::error_code ec) {
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
        if (!ended_) logWarn("api", "client stream ended early: " + ec.message());
        ended_ = true;  // the client went away: nobody to answer
        return;
    }
    std::size_t n = chunk_.size() - parser_.get().body().size;
    pending_.append(chunk_.data(), n);
    nextMessage();
}

void ClientStreamSession::nextMessage() {
    if (ended_) return;
    auto header = e2b::envelopeHeader(pending_);
    if (!header) {
        if (!bodyDone_) return readChunk();
        if (!pending_.empty())
            return fail(errorStatus(ErrorCode::bad_request, "the stream ends inside an envelope"));
        return finish();
    }
    const auto flags = header->flags;
    const std::size_t length = header->length;
    if (flags != e2b::kEnvelopeMessage)
        return fail(errorStatus(ErrorCode::bad_request,
                                flags & e2b::kEnvelopeCompressed
                                    ? "compressed messages are not supported"
                                    : "a request stream carries messages only"));
    if (length > plan_.maxMessage)
        return fail(errorStatus(ErrorCode::payload_too_large,
                                "a message is over " + std::to_string(plan_.maxMessage) +
                                    " bytes"));
    if (pending_.size() < kEnvelopeHeader + length) {
        if (!bodyDone_) return readChunk();
        return fail(errorStatus(ErrorCode::bad_request, "the stream ends inside an envelope"));
    }
    json message = json::parse(pending_.begin() + kEnvelopeHeader, pending_.begin() + kEnvelopeHeader + length,
                               nullptr, false);
    pending_.erase(0, kEnvelopeHeader + length);
    if (!message.is_object())
        return fail(errorStatus(ErrorCode::bad_request, "a message must be a JSON object"));
    // The plan may block (the guest's window): a worker runs it, and the
    // strand reads on only once it returned.
    asio::post(ctx_.workers, [self = shared_from_this(), message = std::move(message)] {
        std::exception_ptr error;
        try {
            self->plan_.onMessage(message);
        } catch (...) {
            error = std::current_exception();
        }
        asio::post(self->stream_.get_executor(), [self, error] {
            if (error) return self->fail(error);
            self->nextMessage();
        });
    });
}

void ClientStreamSession::finish() {
    asio::post(ctx_.workers, [self = shared_from_this()] {
        std::string body;
        try {
            body = answerBody(self->plan_.onEnd());
        } catch (...) {
            auto error = std::current_exception();
            return asio::post(self->stream_.get_executor(), [self, error] { self->fail(error); });
        }
        asio::post(self->stream_.get_executor(),
                   [self, body = std::move(body)]() mutable { self->answer(std::move(body)); });
    });
}

}  // namespace airlock::api

#include "api/StagedUploadSession.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <limits>

#include "api/ErrorMapping.hpp"
#include "core/Error.hpp"
#include "core/Log.hpp"

namespace airlock::api {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;

StagedUploadSession::StagedUploadSession(beast::tcp_stream&& stream, beast::flat_buffer&& buffer,
                                         http::request_parser<http::empty_body>&& header,
                                         StreamContext context, StagedUploadPlan plan)
    : stream_(std::move(stream)),
      buffer_(std::move(buffer)),
      parser_(std::move(header)),
      ctx_(std::move(context)),
      plan_(std::move(plan)) {
    // Bounded by the plan, counted here as it arrives: never by memory.
    parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
    chunk_.resize(kChunk);
}

StagedUploadSession::~StagedUploadSession() {
    if (created_) ::unlink(plan_.stagedPath.c_str());
}

void StagedUploadSession::start() {
    try {
        auto length = parser_.content_length();
        if (length && *length > plan_.maxBytes)
            throw Error(ErrorCode::payload_too_large,
                        "the body (" + std::to_string(*length) + " bytes) is larger than the " +
                            std::to_string(plan_.maxBytes) + " bytes it may be");
        if (length) {
            if (plan_.reserve) plan_.reserve(*length);
            reserved_ = std::numeric_limits<std::uint64_t>::max();
        }
        file_.reset(::open(plan_.stagedPath.c_str(),
                           O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
        if (!file_) throw Error(ErrorCode::insufficient_storage, "cannot stage the upload");
        created_ = true;
    } catch (...) {
        return fail(std::current_exception());
    }
    if (beast::iequals(parser_.get()[http::field::expect], "100-continue")) {
        // The client waits for this before its body (curl does, a second).
        static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        stream_.expires_after(std::chrono::seconds(60));
        return asio::async_write(stream_, asio::buffer(kContinue),
                                 [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                     if (!ec) self->readChunk();
                                 });
    }
    readChunk();
}

void StagedUploadSession::readChunk() {
    if (parser_.is_done()) return complete();
    parser_.get().body().data = chunk_.data();
    parser_.get().body().size = chunk_.size();
    stream_.expires_after(std::chrono::seconds(60));
    http::async_read(stream_, buffer_, parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                         self->onChunk(ec);
                     });
}

void StagedUploadSession::onChunk(beast::error_code ec) {
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
        // The client went away mid-body: what was staged goes with the session.
        logWarn("api", "upload aborted: " + ec.message());
        ended_ = true;
        return;
    }
    std::size_t n = chunk_.size() - parser_.get().body().size;
    try {
        if (received_ + n > plan_.maxBytes)
            throw Error(ErrorCode::payload_too_large,
                        "the body is larger than the " + std::to_string(plan_.maxBytes) +
                            " bytes it may be");
        while (received_ + n > reserved_) {
            if (plan_.reserve) plan_.reserve(kReserveStep);
            reserved_ += kReserveStep;
        }
        std::size_t at = 0;
        while (at < n) {
            ssize_t w = ::write(file_.get(), chunk_.data() + at, n - at);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) throw Error(ErrorCode::insufficient_storage, "cannot stage the upload");
            at += static_cast<std::size_t>(w);
        }
        received_ += n;
    } catch (...) {
        return fail(std::current_exception());
    }
    readChunk();
}

void StagedUploadSession::complete() {
    file_.reset();
    // The blocking step (a tool's run) on a worker; its answer on the strand.
    asio::post(ctx_.workers, [self = shared_from_this()] {
        ApiResponse response;
        std::exception_ptr error;
        try {
            response = self->plan_.finish(self->plan_.stagedPath, self->received_);
        } catch (...) {
            error = std::current_exception();
        }
        // Gone before the answer: a client that reads it finds nothing staged.
        ::unlink(self->plan_.stagedPath.c_str());
        asio::post(self->stream_.get_executor(), [self, response = std::move(response), error] {
            self->created_ = false;
            if (error) return self->fail(error);
            self->answer(response);
        });
    });
}

void StagedUploadSession::answer(const ApiResponse& response) {
    if (ended_) return;
    ended_ = true;
    // Whatever was staged goes now, not when the connection's drain ends.
    file_.reset();
    if (created_) ::unlink(plan_.stagedPath.c_str());
    created_ = false;
    auto res = closingResponse(response);
    stream_.expires_after(std::chrono::seconds(30));
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, std::size_t) {
                          if (ec) return;
                          beast::error_code ignored;
                          self->stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send,
                                                          ignored);
                          // A refusal mid-body: closing on unread input would reset the
                          // connection and lose the answer, so what still comes is read
                          // and dropped, bounded in bytes and time.
                          self->drainBudget_ = 64ull << 20;
                          self->stream_.expires_after(std::chrono::seconds(5));
                          self->drain();
                      });
}

void StagedUploadSession::drain() {
    stream_.async_read_some(asio::buffer(chunk_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                                if (ec || n >= self->drainBudget_) return;
                                self->drainBudget_ -= n;
                                self->drain();
                            });
}

void StagedUploadSession::fail(std::exception_ptr error) {
    answer(renderError(ErrorShape::native, errorStatusFor(error, ctx_.request)));
}

}  // namespace airlock::api

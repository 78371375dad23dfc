#include "api/StagedDownloadSession.hpp"

#include <boost/asio/write.hpp>
#include <cerrno>

#include "core/Log.hpp"

namespace airlock::api {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;

StagedDownloadSession::StagedDownloadSession(beast::tcp_stream&& stream, StreamContext context,
                                             UniqueFd file, std::uint64_t size,
                                             std::string contentType)
    : stream_(std::move(stream)),
      ctx_(std::move(context)),
      file_(std::move(file)),
      size_(size),
      contentType_(std::move(contentType)) {}

void StagedDownloadSession::start() {
    header_ = std::make_shared<http::response<http::empty_body>>(http::status::ok, 11);
    header_->set(http::field::server, "airlockd");
    header_->set(http::field::content_type, contentType_);
    header_->set(http::field::cache_control, "no-store");
    header_->content_length(size_);
    header_->keep_alive(false);
    serializer_ = std::make_shared<http::response_serializer<http::empty_body>>(*header_);
    stream_.expires_after(std::chrono::seconds(60));
    http::async_write_header(stream_, *serializer_,
                             [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                 if (ec) return self->finish();
                                 self->writeNext();
                             });
}

void StagedDownloadSession::writeNext() {
    if (sent_ == size_) return finish();
    chunk_.resize(static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, size_ - sent_)));
    ssize_t n;
    do {
        n = ::pread(file_.get(), chunk_.data(), chunk_.size(), static_cast<off_t>(sent_));
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
        // The length is announced: the client sees a short body, never a wrong one.
        logWarn("api", "a staged download could not be read back");
        return finish();
    }
    stream_.expires_after(std::chrono::seconds(60));
    asio::async_write(stream_, asio::buffer(chunk_.data(), static_cast<std::size_t>(n)),
                      [self = shared_from_this()](beast::error_code ec, std::size_t written) {
                          if (ec) return self->finish();
                          self->sent_ += written;
                          self->writeNext();
                      });
}

void StagedDownloadSession::finish() {
    beast::error_code ec;
    stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
    stream_.close();
    file_.reset();
}

}  // namespace airlock::api

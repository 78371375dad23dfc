#include "api/HttpSession.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include "api/ErrorMapping.hpp"
#include "core/Log.hpp"

namespace airlock::api {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;

namespace {
std::map<std::string, std::string> parseQuery(std::string_view q) {
    auto decode = [](std::string_view s) {
        std::string out;
        for (std::size_t i = 0; i < s.size(); ++i) {
            if (s[i] == '+') {
                out.push_back(' ');
            } else if (s[i] == '%' && i + 2 < s.size() &&
                       std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
                       std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
                out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
                i += 2;
            } else {
                out.push_back(s[i]);
            }
        }
        return out;
    };
    std::map<std::string, std::string> out;
    while (!q.empty()) {
        auto amp = q.find('&');
        auto part = q.substr(0, amp);
        auto eq = part.find('=');
        if (!part.empty())
            out[decode(part.substr(0, eq))] = eq == std::string_view::npos ? "" : decode(part.substr(eq + 1));
        if (amp == std::string_view::npos) break;
        q.remove_prefix(amp + 1);
    }
    return out;
}
}  // namespace

HttpSession::HttpSession(asio::ip::tcp::socket&& socket, Router& router, asio::thread_pool& workers,
                         HttpLimits limits)
    : stream_(std::move(socket)), router_(router), workers_(workers), limits_(limits) {}

void HttpSession::start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->readRequest(); });
}

void HttpSession::readRequest() {
    parser_.emplace();
    parser_->body_limit(limits_.maxBodyBytes);
    parser_->header_limit(16 * 1024);
    stream_.expires_after(limits_.readTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t n) { self->onRead(ec, n); });
}

void HttpSession::onRead(beast::error_code ec, std::size_t) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::connection_reset)
        return close();
    if (ec == http::error::body_limit)
        return respond(errorResponse(ErrorCode::payload_too_large,
                                     "request body exceeds " + std::to_string(limits_.maxBodyBytes) + " bytes"),
                       false, 11);
    if (ec) return respond(errorResponse(ErrorCode::bad_request, "malformed HTTP request: " + ec.message()), false, 11);

    auto& req = parser_->get();
    ApiRequest request;
    request.method = std::string(req.method_string());
    std::string_view target(req.target().data(), req.target().size());
    auto qpos = target.find('?');
    request.path = std::string(target.substr(0, qpos));
    if (qpos != std::string_view::npos) request.query = parseQuery(target.substr(qpos + 1));
    request.authorization = std::string(req[http::field::authorization]);
    request.contentType = std::string(req[http::field::content_type]);
    request.body = std::move(req.body());
    bool keepAlive = req.keep_alive();
    unsigned version = req.version();

    // The controller may block for seconds: keep the I/O thread free.
    stream_.expires_never();
    asio::post(workers_, [self = shared_from_this(), request = std::move(request), keepAlive, version]() mutable {
        ApiResponse response = self->router_.handle(request);
        asio::post(self->stream_.get_executor(), [self, response = std::move(response), keepAlive, version]() mutable {
            self->respond(std::move(response), keepAlive, version);
        });
    });
}

void HttpSession::respond(ApiResponse response, bool keepAlive, unsigned version) {
    response_ = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(response.status), version);
    response_->set(http::field::server, "airlockd");
    if (!response.contentType.empty()) response_->set(http::field::content_type, response.contentType);
    response_->body() = std::move(response.body);
    response_->keep_alive(keepAlive);
    response_->prepare_payload();
    stream_.expires_after(limits_.writeTimeout);
    http::async_write(stream_, *response_,
                      [self = shared_from_this(), keepAlive](beast::error_code ec, std::size_t n) {
                          self->onWrite(keepAlive, ec, n);
                      });
}

void HttpSession::onWrite(bool keepAlive, beast::error_code ec, std::size_t) {
    response_.reset();
    if (ec || !keepAlive) return close();
    readRequest();
}

void HttpSession::close() {
    beast::error_code ec;
    stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
    // Closing with unread input makes the kernel send a reset, which can
    // destroy the response (a 413) before the client reads it: read and drop
    // what the client still sends, bounded in bytes and time.
    drainBudget_ = 64 * 1024 * 1024;
    stream_.expires_after(std::chrono::seconds(5));
    drain();
}

void HttpSession::drain() {
    drainBuffer_.resize(64 * 1024);
    stream_.async_read_some(asio::buffer(drainBuffer_), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
        if (ec || n >= self->drainBudget_) return;
        self->drainBudget_ -= n;
        self->drain();
    });
}

}  // namespace airlock::api

#include "api/StreamContext.hpp"

namespace airlock::api {
namespace http = boost::beast::http;

std::shared_ptr<http::response<http::string_body>> closingResponse(const ApiResponse& response) {
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(response.status), 11);
    res->set(http::field::server, "airlockd");
    if (!response.contentType.empty()) res->set(http::field::content_type, response.contentType);
    for (const auto& [name, value] : response.headers) res->set(name, value);
    res->body() = response.body;
    res->keep_alive(false);
    res->prepare_payload();
    return res;
}

void writeSimpleResponse(boost::beast::tcp_stream& stream, const ApiResponse& response,
                         std::function<void()> done) {
    auto res = closingResponse(response);
    stream.expires_after(std::chrono::seconds(30));
    http::async_write(
        stream, *res,
        [res, &stream, done = std::move(done)](boost::beast::error_code, std::size_t) {
            boost::beast::error_code ec;
            stream.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
            done();
        });
}

}  // namespace airlock::api

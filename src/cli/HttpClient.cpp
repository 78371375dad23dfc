#include "cli/HttpClient.hpp"

#include <limits>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <stdexcept>

namespace airlock::cli {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;

namespace {
// Resolved and connected within 10 s, or runtime_error naming what failed.
void connectTo(beast::tcp_stream& stream, const std::string& host, const std::string& port) {
    asio::ip::tcp::resolver resolver(stream.get_executor());
    beast::error_code ec;
    auto endpoints = resolver.resolve(host, port, ec);
    if (ec) throw std::runtime_error("cannot resolve " + host + ": " + ec.message());
    stream.expires_after(std::chrono::seconds(10));
    stream.connect(endpoints, ec);
    if (ec) throw std::runtime_error("cannot connect to " + host + ":" + port + ": " + ec.message());
}
}  // namespace

HttpClient::HttpClient(std::string baseUrl, std::string apiKey) : apiKey_(std::move(apiKey)) {
    const std::string scheme = "http://";
    if (baseUrl.rfind(scheme, 0) != 0) throw std::runtime_error("AIRLOCK_URL must start with http://");
    std::string rest = baseUrl.substr(scheme.size());
    if (auto slash = rest.find('/'); slash != std::string::npos) rest = rest.substr(0, slash);
    auto colon = rest.rfind(':');
    host_ = colon == std::string::npos ? rest : rest.substr(0, colon);
    port_ = colon == std::string::npos ? "80" : rest.substr(colon + 1);
}

HttpResult HttpClient::request(const std::string& method, const std::string& target, const std::string& body,
                               const std::string& contentType, std::chrono::seconds timeout) {
    asio::io_context ioc;
    beast::tcp_stream stream(ioc);
    connectTo(stream, host_, port_);
    beast::error_code ec;

    http::request<http::string_body> req(http::string_to_verb(method), target, 11);
    req.set(http::field::host, host_);
    req.set(http::field::user_agent, "airlock-cli");
    if (!apiKey_.empty()) req.set(http::field::authorization, "Bearer " + apiKey_);
    if (!body.empty()) req.set(http::field::content_type, contentType);
    req.body() = body;
    req.prepare_payload();
    stream.expires_after(timeout);
    http::write(stream, req, ec);
    // A server may answer early (413) and stop reading: the response is
    // still worth reading when the write failed.
    beast::error_code writeError = ec;
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(1ull << 30);
    http::read(stream, buffer, parser, ec);
    if (ec && writeError) throw std::runtime_error("request failed: " + writeError.message());
    if (ec) throw std::runtime_error("reading the response failed: " + ec.message());
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    return HttpResult{static_cast<int>(parser.get().result_int()), parser.get().body()};
}

HttpResult HttpClient::putFile(const std::string& target, const std::string& localPath) {
    asio::io_context ioc;
    asio::ip::tcp::resolver resolver(ioc);
    beast::tcp_stream stream(ioc);
    stream.connect(resolver.resolve(host_, port_));
    http::request<http::file_body> req(http::verb::put, target, 11);
    beast::error_code ec;
    req.body().open(localPath.c_str(), beast::file_mode::scan, ec);
    if (ec) throw std::runtime_error("cannot open " + localPath + ": " + ec.message());
    req.set(http::field::host, host_);
    req.set(http::field::user_agent, "airlock-cli");
    req.set(http::field::content_type, "application/octet-stream");
    if (!apiKey_.empty()) req.set(http::field::authorization, "Bearer " + apiKey_);
    req.prepare_payload();
    http::write(stream, req, ec);
    beast::error_code writeError = ec;
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res, ec);
    if (ec) throw std::runtime_error("upload failed: " + (writeError ? writeError : ec).message());
    return HttpResult{static_cast<int>(res.result_int()), res.body()};
}

HttpResult HttpClient::getStreaming(const std::string& target, const std::function<void(const char*, std::size_t)>& sink) {
    asio::io_context ioc;
    asio::ip::tcp::resolver resolver(ioc);
    beast::tcp_stream stream(ioc);
    stream.connect(resolver.resolve(host_, port_));
    http::request<http::empty_body> req(http::verb::get, target, 11);
    req.set(http::field::host, host_);
    req.set(http::field::user_agent, "airlock-cli");
    if (!apiKey_.empty()) req.set(http::field::authorization, "Bearer " + apiKey_);
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    beast::error_code ec;
    http::read_header(stream, buffer, parser, ec);
    if (ec) throw std::runtime_error("reading the response failed: " + ec.message());
    int status = static_cast<int>(parser.get().result_int());
    std::string errorBody;
    char chunk[65536];
    while (!parser.is_done()) {
        parser.get().body().data = chunk;
        parser.get().body().size = sizeof chunk;
        http::read_some(stream, buffer, parser, ec);  // as it arrives (logs -f)
        if (ec == http::error::need_buffer) ec = {};
        std::size_t n = sizeof chunk - parser.get().body().size;
        if (status == 200) sink(chunk, n);
        else if (errorBody.size() < 65536) errorBody.append(chunk, n);
        if (ec == http::error::end_of_stream || ec == asio::error::eof) break;  // close-delimited body
        if (ec) throw std::runtime_error("transfer failed: " + ec.message());
    }
    return HttpResult{status, errorBody};
}

void HttpClient::exchange(const std::string& method, const std::string& target,
                          const std::string& body, const Headers& headers,
                          const std::function<void(int, const Headers&)>& onHead,
                          const std::function<void(const char*, std::size_t)>& sink,
                          std::chrono::seconds timeout) {
    asio::io_context ioc;
    beast::tcp_stream stream(ioc);
    connectTo(stream, host_, port_);
    beast::error_code ec;
    http::request<http::string_body> req(http::string_to_verb(method), target, 11);
    req.set(http::field::host, host_ + ":" + port_);
    req.set(http::field::user_agent, "airlock-cli");
    for (const auto& [name, value] : headers) req.set(name, value);
    req.body() = body;
    req.prepare_payload();
    stream.expires_after(timeout);
    http::write(stream, req, ec);
    if (ec) throw std::runtime_error("sending the request failed: " + ec.message());
    beast::flat_buffer buffer;
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    http::read_header(stream, buffer, parser, ec);
    if (ec) throw std::runtime_error("reading the response failed: " + ec.message());
    Headers got;
    for (const auto& field : parser.get()) {
        std::string name(field.name_string());
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        got[name] = std::string(field.value());
    }
    onHead(static_cast<int>(parser.get().result_int()), got);
    char chunk[65536];
    while (!parser.is_done()) {
        parser.get().body().data = chunk;
        parser.get().body().size = sizeof chunk;
        // Whatever arrived, as it arrives: an event stream's events one by one.
        http::read_some(stream, buffer, parser, ec);
        if (ec == http::error::need_buffer) ec = {};
        std::size_t n = sizeof chunk - parser.get().body().size;
        if (n) sink(chunk, n);
        if (ec == http::error::end_of_stream || ec == asio::error::eof) break;
        if (ec) throw std::runtime_error("the answer broke off: " + ec.message());
    }
}

}  // namespace airlock::cli

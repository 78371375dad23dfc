#include "fleet/HttpExchange.hpp"

#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>

namespace airlock::fleet {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {
// Runs one asynchronous operation on a private context: the stream's
// expiry bounds it.
template <class Start>
boost::system::error_code runOne(asio::io_context& ioc, Start&& start) {
    boost::system::error_code result = asio::error::operation_aborted;
    bool done = false;
    start([&](boost::system::error_code ec, auto&&...) {
        result = ec;
        done = true;
    });
    ioc.restart();
    ioc.run();
    return done ? result : asio::error::operation_aborted;
}
}  // namespace

HttpAnswer httpExchange(const HttpPeer& peer, const std::string& method, const std::string& target,
                        const std::map<std::string, std::string>& headers, const std::string& body,
                        Clock::time_point deadline, std::size_t maxBody) {
    HttpAnswer a;
    const std::string where = peer.host + ":" + peer.port;
    asio::io_context ioc;
    auto left = [&] {
        return std::max(
            std::chrono::milliseconds(1),
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
    };
    tcp::resolver resolver(ioc);
    boost::system::error_code ec;
    auto endpoints = resolver.resolve(peer.host, peer.port, ec);
    if (ec) {
        a.why = "cannot resolve " + peer.host + ": " + ec.message();
        return a;
    }
    beast::tcp_stream tcpStream(ioc);
    std::optional<beast::ssl_stream<beast::tcp_stream&>> tlsStream;
    tcpStream.expires_after(left());
    ec = runOne(ioc, [&](auto handler) {
        tcpStream.async_connect(endpoints, [handler](boost::system::error_code e,
                                                     const tcp::endpoint&) mutable { handler(e); });
    });
    if (ec) {
        a.why = "cannot connect to " + where + ": " + ec.message();
        return a;
    }
    if (peer.tls) {
        tlsStream.emplace(tcpStream, *peer.tls);
        SSL_set_tlsext_host_name(tlsStream->native_handle(), peer.host.c_str());
        tlsStream->set_verify_callback(asio::ssl::host_name_verification(peer.host));
        tcpStream.expires_after(left());
        ec = runOne(ioc, [&](auto handler) {
            tlsStream->async_handshake(asio::ssl::stream_base::client, handler);
        });
        if (ec) {
            a.why = "TLS with " + where + " failed: " + ec.message();
            return a;
        }
    }
    http::request<http::string_body> req{http::string_to_verb(method), target, 11};
    req.set(http::field::host, where);
    req.set(http::field::connection, "close");
    for (const auto& [name, value] : headers) req.set(name, value);
    if (!body.empty() || method == "POST" || method == "PUT") {
        if (req[http::field::content_type].empty())
            req.set(http::field::content_type, "application/json");
        req.body() = body;
        req.prepare_payload();
    }
    tcpStream.expires_after(left());
    ec = runOne(ioc, [&](auto handler) {
        if (tlsStream)
            http::async_write(*tlsStream, req, handler);
        else
            http::async_write(tcpStream, req, handler);
    });
    if (ec) {
        a.why = "cannot send to " + where + ": " + ec.message();
        return a;
    }
    a.outcome = HttpOutcome::no_answer;
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(maxBody);
    tcpStream.expires_after(left());
    ec = runOne(ioc, [&](auto handler) {
        if (tlsStream)
            http::async_read(*tlsStream, buffer, parser, handler);
        else
            http::async_read(tcpStream, buffer, parser, handler);
    });
    if (ec) {
        a.why = "no answer from " + where + ": " + ec.message();
        return a;
    }
    a.outcome = HttpOutcome::answered;
    a.status = static_cast<int>(parser.get().result_int());
    a.body = std::move(parser.get().body());
    return a;
}

bool parseOrigin(const std::string& url, bool& tls, std::string& host, std::string& port) {
    std::string rest;
    if (url.rfind("http://", 0) == 0) {
        rest = url.substr(7);
        tls = false;
    } else if (url.rfind("https://", 0) == 0) {
        rest = url.substr(8);
        tls = true;
    } else {
        return false;
    }
    while (!rest.empty() && rest.back() == '/') rest.pop_back();
    auto colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0 || rest.find('/') != std::string::npos ||
        rest.find('@') != std::string::npos)
        return false;
    host = rest.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    port = rest.substr(colon + 1);
    return !port.empty() && port.size() <= 5 &&
           port.find_first_not_of("0123456789") == std::string::npos;
}

bool plainHttpBeyondLoopback(const std::string& url) {
    if (url.rfind("http://", 0) != 0) return false;
    bool tls = false;
    std::string host, port;
    if (!parseOrigin(url, tls, host, port)) return true;
    if (host == "localhost" || host == "::1") return false;
    // 127.0.0.0/8 as a dotted quad.
    if (host.rfind("127.", 0) != 0) return true;
    int dots = 0;
    for (char ch : host) {
        if (ch == '.') ++dots;
        else if (ch < '0' || ch > '9') return true;
    }
    return dots != 3;
}

}  // namespace airlock::fleet

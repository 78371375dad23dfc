#include "packages/UpstreamClient.hpp"

#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cstring>
#include <limits>
#include <optional>

#include "egress/HostLookup.hpp"

namespace airlock::packages {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {
using Clock = std::chrono::steady_clock;

// Runs one asynchronous operation to completion on a private context: the
// stream's expiry bounds it, so nothing blocks forever.
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
    if (!done) return asio::error::operation_aborted;
    return result;
}

std::vector<asio::ip::address> resolveHost(const std::string& host) {
    boost::system::error_code ec;
    auto literal = asio::ip::make_address(host, ec);
    if (!ec) return {literal};
    std::string error;
    auto out = egress::lookUpHost(host, error);
    if (!error.empty()) throw UpstreamError("cannot resolve " + host + ": " + error);
    if (out.empty()) throw UpstreamError("cannot resolve " + host);
    return out;
}
}  // namespace

UpstreamClient::UpstreamClient(std::shared_ptr<asio::ssl::context> tls, UpstreamAddressCheck check,
                               Limits limits)
    : tls_(std::move(tls)), check_(std::move(check)), limits_(limits) {}

std::shared_ptr<asio::ssl::context> UpstreamClient::systemTls() {
    auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
    ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                     asio::ssl::context::no_tlsv1_1);
    ctx->set_default_verify_paths();
    ctx->set_verify_mode(asio::ssl::verify_peer);
    return ctx;
}

UpstreamResponse UpstreamClient::get(const std::string& urlText,
                                     const std::map<std::string, std::string>& headers,
                                     std::uint64_t maxBytes,
                                     const std::function<void(std::string_view)>& onBody,
                                     std::string* errorBody) const {
    auto parsed = HttpUrl::parse(urlText);
    if (!parsed) throw UpstreamError("not an http(s) URL: " + urlText.substr(0, 200));
    HttpUrl url = *parsed;
    auto deadline = Clock::now() + limits_.total;
    for (unsigned hop = 0;; ++hop) {
        asio::io_context ioc;
        auto addresses = resolveHost(url.host);
        std::vector<tcp::endpoint> endpoints;
        std::string refusal;
        for (const auto& a : addresses) {
            std::string why = check_ ? check_(url, a) : "";
            if (why.empty())
                endpoints.emplace_back(a, static_cast<unsigned short>(url.port));
            else
                refusal = why;
        }
        if (endpoints.empty())
            throw UpstreamError("refused to connect to " + url.host + ": " + refusal);

        beast::tcp_stream tcpStream(ioc);
        std::optional<beast::ssl_stream<beast::tcp_stream&>> tlsStream;
        auto remaining = [&] {
            auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
            if (left.count() <= 0) throw UpstreamError("the upstream took too long: " + url.text());
            return left;
        };
        tcpStream.expires_after(std::min(limits_.connect, remaining()));
        auto ec = runOne(ioc, [&](auto handler) {
            tcpStream.async_connect(
                endpoints, [handler](boost::system::error_code e, const tcp::endpoint&) mutable {
                    handler(e);
                });
        });
        if (ec) throw UpstreamError("cannot connect to " + url.origin() + ": " + ec.message());
        if (url.scheme == "https") {
            if (!tls_) throw UpstreamError("no TLS context for " + url.origin());
            tlsStream.emplace(tcpStream, *tls_);
            if (!SSL_set_tlsext_host_name(tlsStream->native_handle(), url.host.c_str()))
                throw UpstreamError("cannot set the TLS server name for " + url.host);
            tlsStream->set_verify_callback(asio::ssl::host_name_verification(url.host));
            tcpStream.expires_after(std::min(limits_.connect, remaining()));
            ec = runOne(ioc, [&](auto handler) {
                tlsStream->async_handshake(asio::ssl::stream_base::client, handler);
            });
            if (ec) throw UpstreamError("TLS with " + url.origin() + " failed: " + ec.message());
        }
        http::request<http::empty_body> req{http::verb::get, url.target, 11};
        std::string hostHeader = url.origin().substr(url.scheme.size() + 3);
        req.set(http::field::host, hostHeader);
        req.set(http::field::user_agent, "airlockd-package-proxy");
        req.set(http::field::accept_encoding, "identity");
        req.set(http::field::connection, "close");
        for (const auto& [k, v] : headers) req.set(k, v);
        if (auto auth = authorization_.find(url.origin()); auth != authorization_.end())
            req.set(http::field::authorization, auth->second);
        else
            req.erase(http::field::authorization);

        auto io = [&](auto&& op) {
            tcpStream.expires_after(std::min(limits_.idle, remaining()));
            return runOne(ioc, op);
        };
        ec = io([&](auto handler) {
            if (tlsStream)
                http::async_write(*tlsStream, req, handler);
            else
                http::async_write(tcpStream, req, handler);
        });
        if (ec) throw UpstreamError("cannot send to " + url.origin() + ": " + ec.message());

        beast::flat_buffer buffer;
        http::response_parser<http::buffer_body> parser;
        // Our own bound applies (maxBytes); Boost 1.74 compares a length
        // with an empty optional as greater, so "no limit" is spelled out.
        parser.body_limit(std::numeric_limits<std::uint64_t>::max());
        parser.header_limit(64 * 1024);
        ec = io([&](auto handler) {
            if (tlsStream)
                http::async_read_header(*tlsStream, buffer, parser, handler);
            else
                http::async_read_header(tcpStream, buffer, parser, handler);
        });
        if (ec) throw UpstreamError("no answer from " + url.origin() + ": " + ec.message());
        UpstreamResponse out;
        out.status = static_cast<int>(parser.get().result_int());
        out.contentType = std::string(parser.get()[http::field::content_type]);
        out.location = std::string(parser.get()[http::field::location]);
        out.finalUrl = url;
        if (out.status >= 300 && out.status < 400 && !out.location.empty()) {
            if (hop >= limits_.maxRedirects)
                throw UpstreamError("too many redirects from " + url.origin());
            auto next = url.resolve(out.location);
            if (!next)
                throw UpstreamError("a redirect to an unusable address: " +
                                    out.location.substr(0, 200));
            // https never becomes http.
            if (url.scheme == "https" && next->scheme != "https")
                throw UpstreamError("refused a redirect from https to http: " + next->origin());
            url = *next;
            continue;
        }
        if (auto length = parser.content_length();
            length && *length > maxBytes && out.status >= 200 && out.status < 300)
            throw UpstreamError(url.text() + " is " + std::to_string(*length) +
                                " bytes, over the proxy's limit of " + std::to_string(maxBytes));
        bool success = out.status >= 200 && out.status < 300;
        std::vector<char> chunk(64 * 1024);
        while (!parser.is_done()) {
            parser.get().body().data = chunk.data();
            parser.get().body().size = chunk.size();
            ec = io([&](auto handler) {
                if (tlsStream)
                    http::async_read(*tlsStream, buffer, parser, handler);
                else
                    http::async_read(tcpStream, buffer, parser, handler);
            });
            if (ec == http::error::need_buffer) ec = {};
            if (ec)
                throw UpstreamError("reading from " + url.origin() + " failed: " + ec.message());
            std::size_t got = chunk.size() - parser.get().body().size;
            out.bytes += got;
            if (success) {
                if (out.bytes > maxBytes)
                    throw UpstreamError(url.text() + " is over the proxy's limit of " +
                                        std::to_string(maxBytes) + " bytes");
                if (got) onBody(std::string_view(chunk.data(), got));
            } else if (errorBody && errorBody->size() < 4096) {
                errorBody->append(chunk.data(),
                                  std::min<std::size_t>(got, 4096 - errorBody->size()));
            }
            if (!success && out.bytes > 64 * 1024) break;
        }
        return out;
    }
}

}  // namespace airlock::packages

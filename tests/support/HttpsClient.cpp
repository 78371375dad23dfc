#include "support/HttpsClient.hpp"

#include <openssl/ssl.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace airlock::test {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
namespace websocket = beast::websocket;
using namespace std::chrono_literals;

bool makeTestCertificates(const std::string& dir, const std::string& san) {
    std::string cmd =
        "set -e; cd '" + dir +
        "'; "
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
        "-subj /CN=airlock-test-ca -keyout ca.key -out ca.pem 2>/dev/null; "
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-subj /CN=127.0.0.1 -keyout server.key -out server.csr 2>/dev/null; "
        "printf 'subjectAltName=" + san + "\\n' > san.ext; "
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
        "-extfile san.ext -out server.pem 2>/dev/null";
    return std::system(cmd.c_str()) == 0;
}

ssl::context clientContext(const TlsOptions& o) {
    ssl::context ctx(ssl::context::tls_client);
    if (o.caFile.empty())
        ctx.set_default_verify_paths();
    else
        ctx.load_verify_file(o.caFile);
    ctx.set_verify_mode(ssl::verify_peer);
    if (o.maxVersion) {
        // An old client: OpenSSL's own floor must not be what refuses it.
        SSL_CTX_set_security_level(ctx.native_handle(), 0);
        SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_VERSION);
        SSL_CTX_set_max_proto_version(ctx.native_handle(), o.maxVersion);
    }
    return ctx;
}

std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> connectTls(asio::io_context& ioc,
                                                                 ssl::context& ctx, int port) {
    auto stream = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(ioc, ctx);
    stream->set_verify_callback(ssl::host_name_verification("127.0.0.1"));
    beast::get_lowest_layer(*stream).expires_after(20s);
    beast::get_lowest_layer(*stream).connect(
        asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    stream->handshake(ssl::stream_base::client);
    return stream;
}

HttpsAnswer httpsRequest(beast::ssl_stream<beast::tcp_stream>& stream, http::verb method,
                         const std::string& target, const std::string& key,
                         const std::string& body) {
    http::request<http::string_body> req(method, target, 11);
    req.set(http::field::host, "127.0.0.1");
    if (!key.empty()) req.set(http::field::authorization, "Bearer " + key);
    if (!body.empty()) {
        req.set(http::field::content_type, "application/json");
        req.body() = body;
    }
    req.prepare_payload();
    beast::get_lowest_layer(stream).expires_after(60s);
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    return {static_cast<int>(res.result_int()), res.body()};
}

WssRun runOverWss(asio::io_context& ioc, ssl::context& ctx, int port, const std::string& key,
                  const std::string& sandbox, const std::string& commandJson) {
    websocket::stream<beast::ssl_stream<beast::tcp_stream>> ws(
        std::move(*connectTls(ioc, ctx, port)));
    ws.set_option(websocket::stream_base::decorator([key](websocket::request_type& req) {
        req.set(http::field::authorization, "Bearer " + key);
    }));
    beast::get_lowest_layer(ws).expires_after(120s);  // the whole run, upgrade to exit
    ws.handshake("127.0.0.1", "/v1/sandboxes/" + sandbox + "/exec/ws");
    ws.text(true);
    ws.write(asio::buffer(commandJson));
    WssRun run;
    for (;;) {
        beast::flat_buffer b;
        beast::error_code ec;
        ws.read(b, ec);
        if (ec) return run;
        std::string m = beast::buffers_to_string(b.data());
        if (ws.got_binary()) {
            if (!m.empty()) run.output += m.substr(1);
            continue;
        }
        auto j = nlohmann::json::parse(m, nullptr, false);
        if (j.is_object() && j.value("type", "") == "exit") {
            run.exitCode = j.value("exit_code", -1);
            return run;
        }
    }
}

}  // namespace airlock::test

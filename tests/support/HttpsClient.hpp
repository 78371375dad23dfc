#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/verb.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <memory>
#include <optional>
#include <string>

namespace airlock::test {

// A CA (ca.pem, ca.key) and a server certificate it signed for `san`
// (server.pem, server.key) in dir, EC keys (quick); false when openssl
// failed. A second call with another dir makes a CA of its own.
bool makeTestCertificates(const std::string& dir, const std::string& san = "IP:127.0.0.1");

struct TlsOptions {
    std::string caFile;  // empty: the system's roots, which do not know a test CA
    int maxVersion = 0;  // e.g. TLS1_1_VERSION; 0: no cap
};
boost::asio::ssl::context clientContext(const TlsOptions& o);

// A TLS connection to 127.0.0.1:port, verified as 127.0.0.1; throws when
// the handshake fails.
std::unique_ptr<boost::beast::ssl_stream<boost::beast::tcp_stream>> connectTls(
    boost::asio::io_context& ioc, boost::asio::ssl::context& ctx, int port);

struct HttpsAnswer {
    int status = 0;
    std::string body;
};
// One request on the connection (keep-alive), Bearer key when given.
HttpsAnswer httpsRequest(boost::beast::ssl_stream<boost::beast::tcp_stream>& stream,
                         boost::beast::http::verb method, const std::string& target,
                         const std::string& key, const std::string& body = {});

// A command over WSS (/v1/sandboxes/{id}/exec/ws): its stdout and stderr as
// they came, and its exit code (nullopt: the stream ended without one).
// Throws when the upgrade is refused.
struct WssRun {
    std::string output;
    std::optional<int> exitCode;
};
WssRun runOverWss(boost::asio::io_context& ioc, boost::asio::ssl::context& ctx, int port,
                  const std::string& key, const std::string& sandbox,
                  const std::string& commandJson);

}  // namespace airlock::test

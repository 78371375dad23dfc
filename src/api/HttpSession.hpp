#pragma once
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <optional>
#include <vector>

#include "api/E2bEnvd.hpp"
#include "api/Router.hpp"

namespace airlock::api {

struct HttpLimits {
    std::size_t maxBodyBytes = 16 * 1024 * 1024;  // JSON bodies (exec stdin included)
    std::chrono::seconds readTimeout{30};
    std::chrono::seconds writeTimeout{60};
    std::size_t maxConnections = 2048;  // open client connections, streams included
};

// One HTTP/1.1 connection, shaped as Beast's advanced_server: owned by
// shared_from_this, all I/O on the connection's strand, body limit and
// timeouts. Route handlers may block (a create boots a VM), so they run on
// the worker pool and post their response back to the strand.
class HttpSession : public std::enable_shared_from_this<HttpSession> {
  public:
    // connectionSlot: this connection's place under the server's cap, handed
    // on to a streaming session that takes the socket over.
    HttpSession(boost::asio::ip::tcp::socket&& socket, Router& router,
                SandboxController& controller, boost::asio::thread_pool& workers, HttpLimits limits,
                std::shared_ptr<void> connectionSlot = nullptr);
    void start();

  private:
    void readRequest();
    void onHeader(boost::beast::error_code ec);
    void onBody(boost::beast::error_code ec);
    void readBody(std::size_t limit);
    // Hands the connection to a streaming session; false if it answered an error itself.
    void startStream(const Router::StreamMatch& match, ApiRequest request);
    // The E2B front door's sandbox requests (envd and public ports).
    void startE2b(ApiRequest head, E2bEnvd::Target target);
    void startConnectStream(ApiRequest request, E2bEnvd::Target target, E2bEnvd::Caller caller);
    void respond(ApiResponse response, bool keepAlive, unsigned version);
    void onWrite(bool keepAlive, boost::beast::error_code ec, std::size_t bytes);
    void close();
    void drain();

    boost::beast::tcp_stream stream_;
    boost::beast::flat_buffer buffer_;
    std::optional<boost::beast::http::request_parser<boost::beast::http::empty_body>> header_;
    std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
    std::shared_ptr<boost::beast::http::response<boost::beast::http::string_body>> response_;
    Router& router_;
    SandboxController& controller_;
    boost::asio::thread_pool& workers_;
    HttpLimits limits_;
    std::vector<char> drainBuffer_;
    std::size_t drainBudget_ = 0;
    std::shared_ptr<void> connectionSlot_;
    // This request is an envd call: its sandbox, its admitted caller (none
    // for /health) and, for an upload, its share of the upload budget.
    std::optional<E2bEnvd::Target> e2bTarget_;
    std::optional<E2bEnvd::Caller> e2bCaller_;
    std::shared_ptr<void> e2bUpload_;
};

}  // namespace airlock::api

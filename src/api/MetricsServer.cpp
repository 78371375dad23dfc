#include "api/MetricsServer.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "api/ErrorMapping.hpp"
#include "core/Error.hpp"
#include "core/Log.hpp"

namespace airlock::api {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace {

class MetricsSession : public std::enable_shared_from_this<MetricsSession> {
  public:
    MetricsSession(tcp::socket&& socket, asio::thread_pool& workers,
                   const std::function<std::string()>& metrics, std::shared_ptr<void> slot)
        : stream_(std::move(socket)),
          workers_(workers),
          metrics_(metrics),
          slot_(std::move(slot)) {}

    void start() {
        parser_.header_limit(8 * 1024);
        parser_.body_limit(4 * 1024);  // a scrape has no body; a small one is read and ignored
        stream_.expires_after(std::chrono::seconds(10));
        http::async_read(stream_, buffer_, parser_,
                         [self = shared_from_this()](beast::error_code ec, std::size_t) {
                             if (ec) return self->close();
                             self->answer();
                         });
    }

  private:
    void answer() {
        const auto& request = parser_.get();
        std::string target(request.target());
        if (auto q = target.find('?'); q != std::string::npos) target.resize(q);
        // Errors have the API's one JSON shape here too.
        if (request.method() != http::verb::get || target != "/metrics") {
            auto refusal = errorResponse(ErrorCode::not_found, "only GET /metrics is served here");
            return reply(http::status::not_found, "application/json", std::move(refusal.body));
        }
        // The figures come from the database: not on the I/O thread.
        asio::post(workers_, [self = shared_from_this()] {
            std::string body;
            bool ok = true;
            try {
                body = self->metrics_();
            } catch (const std::exception& e) {
                ok = false;
                body = errorResponse(ErrorCode::internal,
                                     std::string("metrics unavailable: ") + e.what())
                           .body;
            }
            asio::post(self->stream_.get_executor(), [self, ok, body = std::move(body)]() mutable {
                self->reply(ok ? http::status::ok : http::status::internal_server_error,
                            ok ? "text/plain; version=0.0.4" : "application/json",
                            std::move(body));
            });
        });
    }

    void reply(http::status status, const char* type, std::string body) {
        response_.result(status);
        response_.version(11);
        response_.set(http::field::server, "airlockd");
        response_.set(http::field::content_type, type);
        response_.keep_alive(false);
        response_.body() = std::move(body);
        response_.prepare_payload();
        stream_.expires_after(std::chrono::seconds(30));
        http::async_write(
            stream_, response_,
            [self = shared_from_this()](beast::error_code, std::size_t) { self->close(); });
    }

    void close() {
        beast::error_code ignored;
        stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
        stream_.close();
    }

    beast::tcp_stream stream_;
    asio::thread_pool& workers_;
    std::function<std::string()> metrics_;  // a copy: a session may outlive a stopped server
    std::shared_ptr<void> slot_;
    beast::flat_buffer buffer_{8 * 1024};
    http::request_parser<http::string_body> parser_;
    http::response<http::string_body> response_;
};

}  // namespace

MetricsServer::MetricsServer(asio::io_context& ioc, const std::string& host, unsigned short port,
                             asio::thread_pool& workers, std::function<std::string()> metrics)
    : workers_(workers),
      metrics_(std::move(metrics)),
      listener_(ioc, host, port, "--metrics-listen", 32,
                [this](tcp::socket socket, std::shared_ptr<void> slot) {
                    std::make_shared<MetricsSession>(std::move(socket), workers_, metrics_,
                                                     std::move(slot))
                        ->start();
                }) {}

}  // namespace airlock::api

#include "api/HttpServer.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/strand.hpp>

#include "api/TlsPipe.hpp"
#include "core/Error.hpp"
#include "core/Log.hpp"

namespace airlock::api {
namespace asio = boost::asio;
using asio::ip::tcp;

HttpServer::HttpServer(asio::io_context& ioc, const std::string& host, unsigned short port,
                       Router& router, SandboxController& controller, asio::thread_pool& workers,
                       HttpLimits limits, std::shared_ptr<asio::ssl::context> tls)
    : ioc_(ioc),
      acceptor_(asio::make_strand(ioc)),
      acceptBackoff_(acceptor_.get_executor()),
      router_(router),
      controller_(controller),
      workers_(workers),
      limits_(limits),
      connections_(limits.maxConnections),
      tls_(std::move(tls)) {
    boost::system::error_code ec;
    auto address = asio::ip::make_address(host, ec);
    if (ec) throw Error(ErrorCode::bad_request, "bad listen address '" + host + "'");
    tcp::endpoint endpoint(address, port);
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(endpoint, ec);
    if (ec)
        throw Error(ErrorCode::unavailable,
                    "cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
    acceptor_.listen(asio::socket_base::max_listen_connections);
    port_ = acceptor_.local_endpoint().port();
    accept();
}

void HttpServer::accept() {
    acceptor_.async_accept(
        asio::make_strand(ioc_), [this](boost::system::error_code ec, tcp::socket socket) {
            if (ec == asio::error::operation_aborted) return;
            if (!ec) {
                // Over the cap the connection is closed at once: a client that
                // opens thousands cannot exhaust the daemon's descriptors.
                if (auto slot = connections_.tryAcquire()) {
                    // Streams write small frames one after another (a
                    // WebSocket's "started", then the first output): with
                    // Nagle the second waits for the client's delayed ACK,
                    // 40 ms on Linux.
                    boost::system::error_code ignored;
                    socket.set_option(tcp::no_delay(true), ignored);
                    serve(std::move(socket), std::move(slot));
                } else {
                    boost::system::error_code ignored;
                    socket.close(ignored);
                    logWarn("api", "connection refused: " + std::to_string(connections_.max()) +
                                       " connections open");
                }
            } else if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space) {
                // Out of descriptors: the pending connection stays in the
                // backlog, so accepting again at once would spin the I/O
                // thread. Breathe, then try.
                logWarn("api", "accept failed: " + ec.message() + "; retrying in 200 ms");
                acceptBackoff_.expires_after(std::chrono::milliseconds(200));
                acceptBackoff_.async_wait([this](boost::system::error_code waitEc) {
                    if (!waitEc) accept();
                });
                return;
            }
            accept();
        });
}

void HttpServer::serve(tcp::socket socket, std::shared_ptr<void> slot) {
    if (!tls_) {
        std::make_shared<HttpSession>(std::move(socket), router_, controller_, workers_, limits_,
                                      std::move(slot))
            ->start();
        return;
    }
    // The session speaks plain HTTP on one end of a socket pair; the pipe
    // speaks TLS to the client and copies between them.
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
        logWarn("api", "TLS connection dropped: no socket pair");
        return;
    }
    asio::local::stream_protocol::socket pipeEnd(socket.get_executor());
    tcp::socket sessionEnd(asio::make_strand(ioc_));
    boost::system::error_code ec;
    pipeEnd.assign(asio::local::stream_protocol(), fds[0], ec);
    if (ec) {
        ::close(fds[0]);
        ::close(fds[1]);
        return;
    }
    // Read, write, shutdown and close are all a session does with its socket.
    sessionEnd.assign(tcp::v4(), fds[1], ec);
    if (ec) {
        ::close(fds[1]);
        return;  // pipeEnd closes its own
    }
    std::make_shared<HttpSession>(std::move(sessionEnd), router_, controller_, workers_, limits_,
                                  slot)
        ->start();
    std::make_shared<TlsPipe>(std::move(socket), std::move(pipeEnd), *tls_, std::move(slot))
        ->start();
}

void HttpServer::stop() {
    boost::system::error_code ec;
    acceptor_.close(ec);
    acceptBackoff_.cancel();
}

}  // namespace airlock::api

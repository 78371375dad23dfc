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
                       Router& router, Sandboxes& sandboxes, asio::thread_pool& workers,
                       HttpLimits limits, std::shared_ptr<asio::ssl::context> tls)
    : ioc_(ioc),
      router_(router),
      sandboxes_(sandboxes),
      workers_(workers),
      limits_(limits),
      tls_(std::move(tls)),
      listener_(ioc, host, port, "listen", limits.maxConnections,
                [this](tcp::socket socket, std::shared_ptr<void> slot) {
                    serve(std::move(socket), std::move(slot));
                }) {}

void HttpServer::serve(tcp::socket socket, std::shared_ptr<void> slot) {
    if (!tls_) {
        std::make_shared<HttpSession>(std::move(socket), router_, sandboxes_, workers_, limits_,
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
    std::make_shared<HttpSession>(std::move(sessionEnd), router_, sandboxes_, workers_, limits_,
                                  slot)
        ->start();
    std::make_shared<TlsPipe>(std::move(socket), std::move(pipeEnd), *tls_, std::move(slot))
        ->start();
}

}  // namespace airlock::api

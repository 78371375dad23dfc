#include "api/TcpListener.hpp"

#include <boost/asio/strand.hpp>

#include "core/Error.hpp"
#include "core/Log.hpp"

namespace airlock::api {
namespace asio = boost::asio;
using asio::ip::tcp;

TcpListener::TcpListener(asio::io_context& ioc, const std::string& host, unsigned short port,
                         const std::string& what, std::size_t maxConnections,
                         OnConnection onConnection)
    : ioc_(ioc),
      acceptor_(asio::make_strand(ioc)),
      backoff_(acceptor_.get_executor()),
      what_(what),
      connections_(maxConnections),
      onConnection_(std::move(onConnection)) {
    boost::system::error_code ec;
    auto address = asio::ip::make_address(host, ec);
    if (ec) throw Error(ErrorCode::bad_request, "bad " + what + " address '" + host + "'");
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

void TcpListener::accept() {
    acceptor_.async_accept(
        asio::make_strand(ioc_), [this](boost::system::error_code ec, tcp::socket socket) {
            if (ec == asio::error::operation_aborted) return;
            if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space) {
                // The pending connection stays in the backlog: accepting again
                // at once would spin the I/O thread.
                logWarn("api", what_ + ": accept failed: " + ec.message() + "; retrying in 200 ms");
                backoff_.expires_after(std::chrono::milliseconds(200));
                backoff_.async_wait([this](boost::system::error_code waitEc) {
                    if (!waitEc) accept();
                });
                return;
            }
            if (!ec) {
                if (auto slot = connections_.tryAcquire()) {
                    // Streams write small frames one after another (a
                    // WebSocket's "started", then the first output): with
                    // Nagle the second waits for the client's delayed ACK,
                    // 40 ms on Linux.
                    boost::system::error_code ignored;
                    socket.set_option(tcp::no_delay(true), ignored);
                    onConnection_(std::move(socket), std::move(slot));
                } else {
                    boost::system::error_code ignored;
                    socket.close(ignored);
                    logWarn("api", what_ + ": connection refused: " +
                                       std::to_string(connections_.max()) + " connections open");
                }
            }
            accept();
        });
}

void TcpListener::stop() {
    boost::system::error_code ec;
    acceptor_.close(ec);
    backoff_.cancel();
}

}  // namespace airlock::api

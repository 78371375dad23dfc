#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <string>

#include "api/TenantLimiter.hpp"

namespace airlock::api {

// A listening socket with a cap on open connections: each accepted one
// arrives on a strand of its own with its place under the cap (released
// when the last holder drops it); over the cap it is closed at once, so a
// client opening thousands cannot exhaust the daemon's descriptors. Out of
// descriptors, it breathes 200 ms before accepting again instead of
// spinning the I/O thread.
class TcpListener {
  public:
    using OnConnection =
        std::function<void(boost::asio::ip::tcp::socket socket, std::shared_ptr<void> slot)>;

    // Throws Error(bad_request) for a bad address, Error(unavailable) when
    // it cannot bind. `what` names it in errors and logs ("--metrics-listen").
    TcpListener(boost::asio::io_context& ioc, const std::string& host, unsigned short port,
                const std::string& what, std::size_t maxConnections, OnConnection onConnection);
    unsigned short port() const { return port_; }
    std::size_t openConnections() const { return connections_.open(); }
    void stop();

  private:
    void accept();

    boost::asio::io_context& ioc_;
    boost::asio::ip::tcp::acceptor acceptor_;
    boost::asio::steady_timer backoff_;
    std::string what_;
    ConnectionCounter connections_;
    OnConnection onConnection_;
    unsigned short port_ = 0;
};

}  // namespace airlock::api

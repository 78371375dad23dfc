#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>
#include <memory>
#include <string>

#include "api/HttpSession.hpp"
#include "api/Router.hpp"
#include "api/TenantLimiter.hpp"

namespace airlock::api {

// Accepts connections and hands each to an HttpSession on its own strand.
class HttpServer {
  public:
    HttpServer(boost::asio::io_context& ioc, const std::string& host, unsigned short port,
               Router& router, SandboxController& controller, boost::asio::thread_pool& workers,
               HttpLimits limits = {});
    unsigned short port() const { return port_; }
    std::size_t openConnections() const { return connections_.open(); }
    void stop();

  private:
    void accept();

    boost::asio::io_context& ioc_;
    boost::asio::ip::tcp::acceptor acceptor_;
    Router& router_;
    SandboxController& controller_;
    boost::asio::thread_pool& workers_;
    HttpLimits limits_;
    unsigned short port_ = 0;
    ConnectionCounter connections_;
};

}  // namespace airlock::api

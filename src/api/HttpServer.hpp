#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <memory>
#include <string>

#include "api/HttpSession.hpp"
#include "api/Router.hpp"
#include "api/TcpListener.hpp"

namespace airlock::api {

// Accepts connections and hands each to an HttpSession on its own strand;
// with a TLS context, each goes through a TlsPipe first (HTTPS and WSS).
class HttpServer {
  public:
    HttpServer(boost::asio::io_context& ioc, const std::string& host, unsigned short port,
               Router& router, Sandboxes& sandboxes, boost::asio::thread_pool& workers,
               HttpLimits limits = {}, std::shared_ptr<boost::asio::ssl::context> tls = nullptr);
    unsigned short port() const { return listener_.port(); }
    std::size_t openConnections() const { return listener_.openConnections(); }
    void stop() { listener_.stop(); }

  private:
    void serve(boost::asio::ip::tcp::socket socket, std::shared_ptr<void> slot);

    boost::asio::io_context& ioc_;
    Router& router_;
    Sandboxes& sandboxes_;
    boost::asio::thread_pool& workers_;
    HttpLimits limits_;
    std::shared_ptr<boost::asio::ssl::context> tls_;
    TcpListener listener_;  // last: it accepts once made
};

}  // namespace airlock::api

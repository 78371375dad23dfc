#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>
#include <functional>
#include <string>

#include "api/TcpListener.hpp"

namespace airlock::api {

// --metrics-listen: GET /metrics in Prometheus text, without a key, on an
// address of its own (for a scraper on a private network); nothing else is
// served there, every other request is 404. One request per connection,
// small bounded reads, a few connections at most.
class MetricsServer {
  public:
    MetricsServer(boost::asio::io_context& ioc, const std::string& host, unsigned short port,
                  boost::asio::thread_pool& workers, std::function<std::string()> metrics);
    unsigned short port() const { return listener_.port(); }
    void stop() { listener_.stop(); }

  private:
    boost::asio::thread_pool& workers_;
    std::function<std::string()> metrics_;
    TcpListener listener_;  // last: it accepts once made
};

}  // namespace airlock::api

#pragma once
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <optional>
#include <vector>

#include "api/Router.hpp"
#include "controller/Sandboxes.hpp"

namespace airlock::api {

struct HttpLimits {
    std::size_t maxBodyBytes = 16 * 1024 * 1024;  // JSON bodies (exec stdin included)
    std::chrono::seconds readTimeout{30};
    std::chrono::seconds writeTimeout{60};
    std::size_t maxConnections = 2048;  // open client connections, streams included
};

// One HTTP/1.1 connection, shaped as Beast's advanced_server: owned by
// shared_from_this, all I/O on the connection's strand, body limit and
// timeouts. Every request goes through the one route table: its row is
// selected and its caller admitted from the head, before any body is read.
// Route handlers may block (a create boots a VM), so they run on the worker
// pool and post their response back to the strand.
class HttpSession : public std::enable_shared_from_this<HttpSession> {
  public:
    // connectionSlot: this connection's place under the server's cap, handed
    // on to a streaming session that takes the socket over.
    HttpSession(boost::asio::ip::tcp::socket&& socket, Router& router,
                Sandboxes& sandboxes, boost::asio::thread_pool& workers, HttpLimits limits,
                std::shared_ptr<void> connectionSlot = nullptr);
    void start();

  private:
    void readRequest();
    void onHeader(boost::beast::error_code ec);
    // The rest of a request once it is admitted (and its sandbox awake).
    void admitted(Router::Selection selection, Router::Admission admission, ApiRequest head);
    void onBody(boost::beast::error_code ec);
    void readBody(std::size_t limit);
    // A request whose row is selected and whose caller is admitted, until
    // its body has been read.
    struct Pending {
        Router::Selection selection;
        Router::Admission admission;
    };
    // Hands the connection to a stream row's session.
    void startStream(const Router::Selection& selection, Router::Admission admission,
                     ApiRequest head);
    // A sandbox of another node: the connection goes to a ForwardSession.
    void forward(Router::Admission admission);
    // A connect_stream row, its body read: plans the call, then streams.
    void startConnectStream(Pending pending, ApiRequest request);
    void respond(ApiResponse response, bool keepAlive, unsigned version);
    // An answer from the head alone (a refusal before any body is read).
    void refuse(ApiResponse response);
    void onWrite(bool keepAlive, boost::beast::error_code ec, std::size_t bytes);
    void close();
    void drain();

    boost::beast::tcp_stream stream_;
    boost::beast::flat_buffer buffer_;
    std::optional<boost::beast::http::request_parser<boost::beast::http::empty_body>> header_;
    std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
    std::shared_ptr<boost::beast::http::response<boost::beast::http::string_body>> response_;
    Router& router_;
    Sandboxes& sandboxes_;
    boost::asio::thread_pool& workers_;
    HttpLimits limits_;
    std::vector<char> drainBuffer_;
    std::size_t drainBudget_ = 0;
    std::shared_ptr<void> connectionSlot_;
    std::optional<Pending> pending_;
    // The row (and door) the request being answered selected: what its
    // answer is counted under.
    const Route* route_ = nullptr;
    Door door_ = Door::native;
};

}  // namespace airlock::api

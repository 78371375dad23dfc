#pragma once
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <functional>
#include <memory>

#include "agentclient/AgentPipe.hpp"
#include "api/StreamContext.hpp"

namespace airlock::api {

// GET /preview/{sandbox}/{port}/{token}/rest...: a transparent byte pipe to
// guest 127.0.0.1:PORT through an agent tunnel stream. The request head is
// re-serialised with the prefix stripped (and Connection: close unless it is
// an upgrade); everything after it, a body or WebSocket frames, is piped raw
// both ways. The token is the port's own capability: no API key.
class PreviewProxySession : public std::enable_shared_from_this<PreviewProxySession> {
  public:
    PreviewProxySession(boost::beast::tcp_stream&& stream, boost::beast::flat_buffer&& buffer,
                        boost::beast::http::request<boost::beast::http::empty_body>&& head,
                        StreamContext context);
    // A request already routed to a port by its Host (E2B's
    // <port>-<id>.<domain>): the path goes to the guest as it is, and
    // `open` opens the tunnel (the caller checked access).
    using Opener = std::function<std::shared_ptr<AgentStream>(AgentStream::Handler)>;
    PreviewProxySession(boost::beast::tcp_stream&& stream, boost::beast::flat_buffer&& buffer,
                        boost::beast::http::request<boost::beast::http::empty_body>&& head,
                        StreamContext context, unsigned port, Opener open);
    void start();

  private:
    void onTunnelEvent(AgentStream::Event&& event);
    void sendToGuest(std::string bytes);
    void readFromClient();
    void finish();

    boost::beast::tcp_stream stream_;
    boost::beast::flat_buffer buffer_;
    boost::beast::http::request<boost::beast::http::empty_body> head_;
    StreamContext ctx_;
    AgentPipe pipe_;
    bool ended_ = false;
    std::vector<char> readBuffer_;
    unsigned directPort_ = 0;
    Opener open_;
};

}  // namespace airlock::api

#pragma once
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <optional>

#include "agentclient/AgentPipe.hpp"
#include "api/StreamContext.hpp"
#include "core/Sha256Stream.hpp"

namespace airlock::api {

// PUT /v1/sandboxes/{id}/files?path=/abs: the request body goes to the guest
// chunk by chunk, never whole in memory. Each chunk is handed to the agent
// stream on a worker (it waits for the agent's window) and only then is the
// next one read from the client: end-to-end backpressure.
class UploadSession : public std::enable_shared_from_this<UploadSession> {
  public:
    UploadSession(boost::beast::tcp_stream&& stream, boost::beast::flat_buffer&& buffer,
                  boost::beast::http::request_parser<boost::beast::http::empty_body>&& header,
                  StreamContext context);
    void start();

  private:
    void readChunk();
    void onChunk(boost::beast::error_code ec);
    void finishUpload();
    void onAgentEvent(AgentStream::Event&& event);
    void fail(const ApiResponse& response);

    boost::beast::tcp_stream stream_;
    boost::beast::flat_buffer buffer_;
    boost::beast::http::request_parser<boost::beast::http::buffer_body> parser_;
    StreamContext ctx_;
    AgentPipe pipe_;
    std::vector<char> chunk_;
    std::uint64_t received_ = 0;
    std::string path_;
    Sha256Stream hash_;                    // of what went to the guest: the audit's file.written
    boost::asio::steady_timer waitTimer_;  // a chunk the guest takes no window for, or its answer
    bool finishing_ = false;               // all bytes sent, the guest's answer awaited
    bool ended_ = false;
};

}  // namespace airlock::api

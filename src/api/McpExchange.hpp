#pragma once
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <mutex>
#include <optional>

#include "api/ConnectStreamSession.hpp"
#include "api/McpServer.hpp"
#include "api/StreamContext.hpp"

namespace airlock::api {

// One POST to /mcp on its connection: the body read (bounded, with a
// deadline), the message handed to the MCP server on a worker, and its
// answer written whole or as Server-Sent Events.
class McpExchange : public McpReply, public std::enable_shared_from_this<McpExchange> {
  public:
    static constexpr std::size_t kMaxBody = 4 * 1024 * 1024;
    McpExchange(boost::beast::tcp_stream&& stream, boost::beast::flat_buffer&& buffer,
                boost::beast::http::request_parser<boost::beast::http::empty_body>&& header,
                StreamContext context, McpServer& server);
    void start();

    void answer(ApiResponse response) override;
    void openEvents() override;
    bool send(const std::string& message) override;
    void end() override;

  private:
    boost::beast::tcp_stream stream_;
    boost::beast::flat_buffer buffer_;
    boost::beast::http::request_parser<boost::beast::http::string_body> parser_;
    StreamContext context_;
    McpServer& server_;
    std::mutex mutex_;
    bool answered_ = false;
    std::shared_ptr<ConnectStreamSession> events_;
};

}  // namespace airlock::api

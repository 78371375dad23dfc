#include "api/McpExchange.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include "api/ErrorMapping.hpp"
#include "core/Log.hpp"
#include "mcp/JsonRpc.hpp"

namespace airlock::api {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

McpExchange::McpExchange(beast::tcp_stream&& stream, beast::flat_buffer&& buffer,
                         http::request_parser<http::empty_body>&& header, StreamContext context,
                         McpServer& server)
    : stream_(std::move(stream)),
      buffer_(std::move(buffer)),
      parser_(std::move(header)),
      context_(std::move(context)),
      server_(server) {
    parser_.body_limit(kMaxBody);
}

void McpExchange::start() {
    stream_.expires_after(std::chrono::seconds(30));
    http::async_read(stream_, buffer_, parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                         if (ec == http::error::body_limit)
                             return self->answer(ApiResponse{
                                 413, "application/json",
                                 mcp::JsonRpc::error(nullptr, mcp::rpc::kInvalidRequest,
                                                     "a message over 4 MiB")});
                         if (ec) {
                             beast::error_code ignored;
                             self->stream_.socket().close(ignored);
                             return;
                         }
                         self->stream_.expires_never();
                         ApiRequest request = self->context_.request;
                         request.body = std::move(self->parser_.get().body());
                         // The server may block (sessions, a tool's REST call): a worker.
                         asio::post(self->context_.workers, [self, request = std::move(request)] {
                             try {
                                 self->server_.post(self->context_.principal, request, self);
                             } catch (const std::exception& e) {
                                 logError("mcp", std::string("a POST to /mcp failed: ") + e.what());
                                 self->answer(ApiResponse{500, "application/json",
                                                          mcp::JsonRpc::error(nullptr, mcp::rpc::kInternalError,
                                                                              e.what())});
                             }
                         });
                     });
}

void McpExchange::answer(ApiResponse response) {
    {
        std::lock_guard lock(mutex_);
        if (answered_) return;
        answered_ = true;
    }
    asio::dispatch(stream_.get_executor(), [self = shared_from_this(), response = std::move(response)] {
        writeSimpleResponse(self->stream_, response, [self] {});
    });
}

void McpExchange::openEvents() {
    std::lock_guard lock(mutex_);
    if (answered_) return;
    answered_ = true;
    // The connection's slots go with the stream: held while it runs.
    auto slots = std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<void>>>(
        context_.tenantSlot, context_.connectionSlot);
    events_ = std::make_shared<ConnectStreamSession>(std::move(stream_), std::chrono::seconds(15), "",
                                                     slots, context_.workers,
                                                     ConnectStreamSession::Framing::sse);
    events_->start();
}

bool McpExchange::send(const std::string& message) {
    std::shared_ptr<ConnectStreamSession> events;
    {
        std::lock_guard lock(mutex_);
        events = events_;
    }
    return events && events->push(message);
}

void McpExchange::end() {
    std::shared_ptr<ConnectStreamSession> events;
    {
        std::lock_guard lock(mutex_);
        events = events_;
    }
    if (events) events->end(std::nullopt);
}

}  // namespace airlock::api

#pragma once
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "api/Authenticator.hpp"
#include "api/HttpTypes.hpp"
#include "controller/ApprovalGates.hpp"
#include "controller/GuestFiles.hpp"
#include "controller/GuestPorts.hpp"
#include "controller/SandboxCommands.hpp"

namespace airlock::api {

// The sandbox services a streaming session reaches, and no more.
struct StreamServices {
    GuestFiles& files;
    GuestPorts& ports;
    SandboxCommands& commands;
    ApprovalGates& gates;
};

// What a streaming session needs besides its socket: the sandbox services,
// the worker pool for calls that may block, and the authenticated request.
struct StreamContext {
    StreamServices sandboxes;
    boost::asio::thread_pool& workers;
    ApiRequest request;  // body empty: streaming sessions read it themselves
    std::string tenant;
    std::vector<std::string> params;
    // Held for the session's life: its tenant's in-flight slot and its
    // connection's place under the server's cap.
    std::shared_ptr<void> tenantSlot;
    std::shared_ptr<void> connectionSlot;
    Principal principal;  // who calls
};

// A connection handed to a streaming route once its caller was authorized:
// the socket, what was read past the header, the header's parser (its state
// goes with it) and the context. A route's factory moves what it takes into
// its session, or leaves them and returns the error to answer.
struct StreamHandover {
    boost::beast::tcp_stream& stream;
    boost::beast::flat_buffer& buffer;
    boost::beast::http::request_parser<boost::beast::http::empty_body>& header;
    StreamContext context;
};
using StreamFactory = std::function<std::optional<ApiResponse>(StreamHandover& handover)>;

// A complete small response that closes the connection (Connection: close).
std::shared_ptr<boost::beast::http::response<boost::beast::http::string_body>> closingResponse(
    const ApiResponse& response);
// Writes one and closes: used by streaming sessions for errors before their
// stream started.
void writeSimpleResponse(boost::beast::tcp_stream& stream, const ApiResponse& response,
                         std::function<void()> done);

}  // namespace airlock::api

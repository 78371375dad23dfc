#pragma once
#include <boost/asio/thread_pool.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "api/Authenticator.hpp"
#include "api/HttpTypes.hpp"
#include "api/McpTools.hpp"
#include "mcp/McpSessions.hpp"

namespace airlock::api {

// How a POST to /mcp is answered: whole (JSON, 202, an error), or as a
// stream of Server-Sent Events (a tool call: progress, then its result).
class McpReply {
  public:
    virtual ~McpReply() = default;
    virtual void answer(ApiResponse response) = 0;
    // Starts the event stream; each send is one JSON-RPC message; end()
    // closes it. False from send once the client is gone.
    virtual void openEvents() = 0;
    virtual bool send(const std::string& message) = 0;
    virtual void end() = 0;
};

// MCP's Streamable HTTP transport at /mcp (docs/mcp.md): a session per
// initialize (Mcp-Session-Id, the key's own), protocol versions the
// official SDKs send, Origin checked, JSON-RPC errors as the specification
// names them, tools and resources from McpTools. Tool calls run on a pool
// of their own, each registered in its session so a cancel stops it.
class McpServer {
  public:
    static constexpr const char* kLatestVersion = "2025-11-25";
    McpServer(McpTools& tools, std::string version, mcp::McpSessions::Limits limits = {});
    ~McpServer();

    // One POST, authenticated as `caller` (the route did it).
    void post(const Principal& caller, const ApiRequest& request, std::shared_ptr<McpReply> reply);
    // DELETE: the session ends (its calls in flight are cancelled).
    ApiResponse remove(const Principal& caller, const ApiRequest& request);
    static bool supportedVersion(const std::string& v);

  private:
    nlohmann::json handleRequest(const Principal& caller, const mcp::McpSessions::Session& session,
                                 const std::string& method, const nlohmann::json& params,
                                 McpCall& call);
    void callTool(const Principal& caller, const mcp::McpSessions::Session& session,
                  const nlohmann::json& id, const nlohmann::json& params,
                  const ApiRequest& request, std::shared_ptr<McpReply> reply);

    McpTools& tools_;
    std::string version_;
    mcp::McpSessions sessions_;
    // Pools of the MCP door's own: its requests make REST calls to this
    // listener, which the daemon's workers serve, so none of them waits on
    // a daemon worker. Tool calls (which may wait on a human) apart from
    // other requests; notifications never wait on either.
    boost::asio::thread_pool calls_{16};
    boost::asio::thread_pool requests_{4};
};

}  // namespace airlock::api

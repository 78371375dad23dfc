#include "api/McpServer.hpp"

#include <boost/asio/post.hpp>

#include "api/ErrorMapping.hpp"
#include "core/Error.hpp"
#include "core/Log.hpp"
#include "mcp/JsonRpc.hpp"

namespace airlock::api {
using mcp::JsonRpc;
using mcp::RpcError;
using nlohmann::json;
namespace rpc = mcp::rpc;

namespace {

ApiResponse jsonRpcAnswer(int status, std::string body) {
    return ApiResponse{status, "application/json", std::move(body)};
}

ApiResponse rpcError(int status, const json& id, int code, const std::string& message) {
    return jsonRpcAnswer(status, JsonRpc::error(id, code, message));
}

// The Origin a browser sends names the page's site: only this server's own
// (scheme aside) may call it.
bool originAllowed(const ApiRequest& r) {
    std::string origin = r.header("origin");
    if (origin.empty()) return true;  // not a browser
    for (const char* scheme : {"http://", "https://"})
        if (origin == scheme + r.host) return true;
    return false;
}

bool mediaIs(const std::string& value, const char* type) {
    return value.find(type) != std::string::npos;
}

}  // namespace

McpServer::McpServer(McpTools& tools, std::string version, mcp::McpSessions::Limits limits)
    : tools_(tools), version_(std::move(version)), sessions_(limits) {}

McpServer::~McpServer() {
    // Calls that wait (for a human, a command) stop now, not at their timeout.
    sessions_.closeAll();
    calls_.join();
    requests_.join();
}

bool McpServer::supportedVersion(const std::string& v) {
    return v == "2025-11-25" || v == "2025-06-18" || v == "2025-03-26";
}

ApiResponse McpServer::remove(const Principal& caller, const ApiRequest& request) {
    if (!originAllowed(request))
        return rpcError(403, nullptr, rpc::kInvalidRequest, "this Origin may not call /mcp");
    std::string id = request.header("mcp-session-id");
    if (id.empty()) return rpcError(400, nullptr, rpc::kInvalidRequest, "Mcp-Session-Id is missing");
    if (!sessions_.close(id, caller.keyId))
        return rpcError(404, nullptr, -32001, "no such session (it ended or expired)");
    return ApiResponse{204, "", ""};
}

void McpServer::post(const Principal& caller, const ApiRequest& request,
                     std::shared_ptr<McpReply> reply) {
    if (!originAllowed(request))
        return reply->answer(rpcError(403, nullptr, rpc::kInvalidRequest, "this Origin may not call /mcp"));
    std::string accept = request.header("accept");
    if (!accept.empty() && !mediaIs(accept, "application/json") &&
        !mediaIs(accept, "text/event-stream") && !mediaIs(accept, "*/*"))
        return reply->answer(rpcError(406, nullptr, rpc::kInvalidRequest,
                                      "Accept must allow application/json or text/event-stream"));
    if (!mediaIs(request.contentType, "application/json"))
        return reply->answer(rpcError(415, nullptr, rpc::kInvalidRequest,
                                      "a JSON-RPC message is sent as application/json"));
    mcp::RpcMessage m;
    try {
        m = JsonRpc::parse(request.body);
    } catch (const RpcError& e) {
        json id = e.data().is_object() && e.data().contains("id") ? e.data()["id"] : json();
        return reply->answer(rpcError(400, id, e.code(), e.what()));
    }
    if (m.isRequest() && m.method == "initialize") {
        std::string asked = m.params.value("protocolVersion", "");
        if (!m.params.contains("protocolVersion") || !m.params["protocolVersion"].is_string())
            return reply->answer(jsonRpcAnswer(
                200, JsonRpc::error(m.id, rpc::kInvalidParams, "initialize needs protocolVersion")));
        std::string version = supportedVersion(asked) ? asked : kLatestVersion;
        std::string session = sessions_.open(caller.keyId, version);
        json result{{"protocolVersion", version},
                    {"capabilities",
                     {{"tools", {{"listChanged", false}}}, {"resources", {{"listChanged", false}}}}},
                    {"serverInfo", {{"name", "airlockd"}, {"title", "Airlock"}, {"version", version_}}},
                    {"instructions",
                     "Airlock sandboxes are microVMs. Commands run under the sandbox's policy: a "
                     "held command answers pending_approval; call wait_for_approval with its id."}};
        ApiResponse r = jsonRpcAnswer(200, JsonRpc::result(m.id, result));
        r.headers["Mcp-Session-Id"] = session;
        return reply->answer(std::move(r));
    }
    std::string sessionId = request.header("mcp-session-id");
    if (sessionId.empty())
        return reply->answer(rpcError(400, m.isRequest() ? m.id : json(), rpc::kInvalidRequest,
                                      "Mcp-Session-Id is missing: initialize first"));
    auto session = sessions_.find(sessionId, caller.keyId);
    if (!session)
        return reply->answer(rpcError(404, m.isRequest() ? m.id : json(), -32001,
                                      "no such session (it ended or expired): initialize again"));
    std::string version = request.header("mcp-protocol-version");
    if (!version.empty() && !supportedVersion(version))
        return reply->answer(rpcError(400, m.isRequest() ? m.id : json(), rpc::kInvalidRequest,
                                      "MCP-Protocol-Version " + version.substr(0, 32) +
                                          " is not one this server speaks"));
    if (!m.isRequest()) {
        if (m.method == "notifications/cancelled" && m.params.contains("requestId")) {
            std::string reason = m.params.value("reason", "cancelled by the client");
            if (reason.size() > 200) reason.resize(200);
            sessions_.cancel(sessionId, JsonRpc::dump(m.params["requestId"]));
        }
        return reply->answer(ApiResponse{202, "", ""});
    }
    if (m.method == "tools/call") return callTool(caller, *session, m.id, m.params, request, reply);
    boost::asio::post(requests_, [this, caller, session = *session, m, reply,
                                  authorization = request.authorization] {
        McpCall call;
        call.principal = caller;
        call.authorization = authorization;
        std::string answer;
        try {
            answer = JsonRpc::result(m.id, handleRequest(caller, session, m.method, m.params, call));
        } catch (const RpcError& e) {
            answer = JsonRpc::error(m.id, e.code(), e.what(), e.data());
        } catch (const std::exception& e) {
            answer = JsonRpc::error(m.id, rpc::kInternalError, e.what());
        }
        reply->answer(jsonRpcAnswer(200, std::move(answer)));
    });
}

json McpServer::handleRequest(const Principal& caller, const mcp::McpSessions::Session&,
                              const std::string& method, const json& params, McpCall& call) {
    if (method == "ping") return json::object();
    if (method == "tools/list") return {{"tools", tools_.list(caller.role)}};
    if (method == "resources/list") return {{"resources", tools_.resources(call)}};
    if (method == "resources/templates/list")
        return {{"resourceTemplates", tools_.resourceTemplates()}};
    if (method == "resources/read") {
        if (!params.contains("uri") || !params["uri"].is_string())
            throw RpcError(rpc::kInvalidParams, "resources/read needs uri (a string)");
        return tools_.readResource(params["uri"].get<std::string>(), call);
    }
    throw RpcError(rpc::kMethodNotFound, "method " + method.substr(0, 128) + " is not served here");
}

void McpServer::callTool(const Principal& caller, const mcp::McpSessions::Session& session,
                         const json& id, const json& params, const ApiRequest& request,
                         std::shared_ptr<McpReply> reply) {
    if (!params.contains("name") || !params["name"].is_string())
        return reply->answer(jsonRpcAnswer(
            200, JsonRpc::error(id, rpc::kInvalidParams, "tools/call needs name (a string)")));
    json arguments = params.contains("arguments") ? params["arguments"] : json::object();
    auto call = std::make_shared<McpCall>();
    call->principal = caller;
    call->authorization = request.authorization;
    std::string key = JsonRpc::dump(id);
    // A cancel ends the stream without an answer (the client gave up on it)
    // and stops the work: the command in the guest is killed.
    if (!sessions_.begin(session.id, key, [call, reply] {
            call->cancelled->store(true);
            call->cancel->cancel("the MCP client cancelled the call");
            reply->end();
        }))
        return reply->answer(jsonRpcAnswer(
            200, JsonRpc::error(id, rpc::kInvalidRequest,
                                "request " + key + " is cancelled, running already, or one too many")));
    reply->openEvents();
    json token = params.contains("_meta") && params["_meta"].is_object() &&
                         params["_meta"].contains("progressToken")
                     ? params["_meta"]["progressToken"]
                     : json();
    if (token.is_string() || token.is_number_integer()) {
        auto last = std::make_shared<double>(-1);
        call->progress = [reply, token, last, cancelled = call->cancelled](double progress,
                                                                          const std::string& message) {
            if (cancelled->load() || progress <= *last) return;  // strictly increasing
            *last = progress;
            reply->send(JsonRpc::notification(
                "notifications/progress",
                {{"progressToken", token}, {"progress", progress}, {"message", message}}));
        };
    }
    boost::asio::post(calls_, [this, call, reply, id, key, sessionId = session.id,
                               name = params["name"].get<std::string>(), arguments] {
        std::string answer;
        try {
            auto r = tools_.call(name, arguments, *call);
            json result{{"content", json::array({{{"type", "text"},
                                                   {"text", r.isError ? r.text : JsonRpc::dump(r.structured)}}})}};
            if (r.isError)
                result["isError"] = true;
            else
                result["structuredContent"] = r.structured;
            answer = JsonRpc::result(id, result);
        } catch (const RpcError& e) {
            answer = JsonRpc::error(id, e.code(), e.what(), e.data());
        } catch (const std::exception& e) {
            answer = JsonRpc::error(id, rpc::kInternalError, e.what());
        }
        sessions_.end(sessionId, key);
        if (call->cancelled->load()) return;  // ended already, with no answer
        reply->send(answer);
        reply->end();
    });
}

}  // namespace airlock::api

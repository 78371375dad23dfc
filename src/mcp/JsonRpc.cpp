#include "mcp/JsonRpc.hpp"

namespace airlock::mcp {
using nlohmann::json;

namespace {

constexpr int kMaxDepth = 64;

// Nesting deeper than kMaxDepth is refused before the parser recurses into it.
bool tooDeep(std::string_view text) {
    int depth = 0;
    bool inString = false, escaped = false;
    for (char ch : text) {
        if (inString) {
            if (escaped) escaped = false;
            else if (ch == '\\') escaped = true;
            else if (ch == '"') inString = false;
            continue;
        }
        if (ch == '"') inString = true;
        else if (ch == '[' || ch == '{') {
            if (++depth > kMaxDepth) return true;
        } else if (ch == ']' || ch == '}') {
            --depth;
        }
    }
    return false;
}

bool validId(const json& id) {
    if (id.is_string()) return id.get_ref<const std::string&>().size() <= 256;
    return id.is_number_integer() || id.is_number_unsigned();
}

json idData(const json& j) {
    if (j.is_object() && j.contains("id") && validId(j["id"])) return json{{"id", j["id"]}};
    return nullptr;
}

}  // namespace

RpcMessage JsonRpc::parse(std::string_view text) {
    if (text.size() > kMaxMessageBytes)
        throw RpcError(rpc::kParseError, "the message is larger than " +
                                             std::to_string(kMaxMessageBytes >> 20) + " MiB");
    if (tooDeep(text))
        throw RpcError(rpc::kParseError,
                       "the message nests deeper than " + std::to_string(kMaxDepth) + " levels");
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) throw RpcError(rpc::kParseError, "the message is not valid JSON");
    if (j.is_array())
        throw RpcError(rpc::kInvalidRequest, "batches are not part of MCP: send one message at a time");
    if (!j.is_object()) throw RpcError(rpc::kInvalidRequest, "a JSON-RPC message is a JSON object");
    auto invalid = [&](const std::string& why) {
        return RpcError(rpc::kInvalidRequest, why, idData(j));
    };
    if (!j.contains("jsonrpc") || j["jsonrpc"] != "2.0")
        throw invalid("\"jsonrpc\" must be \"2.0\"");
    RpcMessage m;
    bool hasId = j.contains("id");
    if (hasId && !validId(j["id"]))
        throw RpcError(rpc::kInvalidRequest,
                       "\"id\" must be a string (at most 256 bytes) or an integer, never null");
    if (hasId) m.id = j["id"];
    if (j.contains("method")) {
        if (!j["method"].is_string() || j["method"].get_ref<const std::string&>().empty() ||
            j["method"].get_ref<const std::string&>().size() > kMaxMethodBytes)
            throw invalid("\"method\" must be a non-empty string of at most " +
                          std::to_string(kMaxMethodBytes) + " bytes");
        if (j.contains("result") || j.contains("error"))
            throw invalid("a request carries no \"result\" or \"error\"");
        m.method = j["method"].get<std::string>();
        m.kind = hasId ? RpcMessage::Kind::request : RpcMessage::Kind::notification;
        if (j.contains("params")) {
            if (!j["params"].is_object())
                throw invalid("\"params\" must be an object (MCP names its parameters)");
            m.params = j["params"];
        }
        for (const auto& [k, v] : j.items())
            if (k != "jsonrpc" && k != "id" && k != "method" && k != "params")
                throw invalid("unknown member \"" + k + "\" in a request");
        return m;
    }
    // A response (to a request of the server's: MCP servers here send none,
    // but a client may answer a ping).
    if (!hasId) throw invalid("a message without \"method\" is a response and needs an \"id\"");
    if (j.contains("result") == j.contains("error"))
        throw invalid("a response has exactly one of \"result\" and \"error\"");
    m.kind = RpcMessage::Kind::response;
    if (j.contains("result")) m.result = j["result"];
    if (j.contains("error")) m.error = j["error"];
    return m;
}

std::string JsonRpc::dump(const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string JsonRpc::result(const json& id, const json& result) {
    return dump(json{{"jsonrpc", "2.0"}, {"id", id}, {"result", result}});
}

std::string JsonRpc::error(const json& id, int code, const std::string& message,
                           const json& data) {
    json e{{"code", code}, {"message", message}};
    if (!data.is_null()) e["data"] = data;
    json j{{"jsonrpc", "2.0"}, {"error", e}};
    if (!id.is_null()) j["id"] = id;
    return dump(j);
}

std::string JsonRpc::notification(const std::string& method, const json& params) {
    return dump(json{{"jsonrpc", "2.0"}, {"method", method}, {"params", params}});
}

}  // namespace airlock::mcp

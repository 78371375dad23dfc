#pragma once
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

namespace airlock::mcp {

// JSON-RPC 2.0 as MCP uses it: one message per body or line, never a batch
// (removed from MCP in 2025-06-18), ids kept as the JSON value they came as.
namespace rpc {
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;
constexpr int kResourceNotFound = -32002;
}  // namespace rpc

// A JSON-RPC error to answer with: its code, a readable message, optional data.
class RpcError : public std::runtime_error {
  public:
    RpcError(int code, const std::string& message, nlohmann::json data = nullptr)
        : std::runtime_error(message), code_(code), data_(std::move(data)) {}
    int code() const { return code_; }
    const nlohmann::json& data() const { return data_; }

  private:
    int code_;
    nlohmann::json data_;
};

struct RpcMessage {
    enum class Kind { request, notification, response };
    Kind kind = Kind::request;
    nlohmann::json id;  // a string or an integer (request, response)
    std::string method;
    nlohmann::json params = nlohmann::json::object();  // always an object
    nlohmann::json result, error;                      // a response's

    bool isRequest() const { return kind == Kind::request; }
};

class JsonRpc {
  public:
    static constexpr std::size_t kMaxMessageBytes = 4 * 1024 * 1024;
    static constexpr std::size_t kMaxMethodBytes = 128;

    // One message. RpcError(kParseError) for text that is not JSON (or is
    // too large or too deep), RpcError(kInvalidRequest) for JSON that is not
    // one JSON-RPC 2.0 message (a batch, a null or fractional id, params that
    // are not an object, a response with both or neither of result and error).
    // The error's data carries the id when one could be read.
    static RpcMessage parse(std::string_view text);

    // Rendered compact, on one line, invalid UTF-8 replaced (guest output).
    static std::string result(const nlohmann::json& id, const nlohmann::json& result);
    // A null id: the request's id could not be read, and none is sent.
    static std::string error(const nlohmann::json& id, int code, const std::string& message,
                             const nlohmann::json& data = nullptr);
    static std::string notification(const std::string& method, const nlohmann::json& params);
    static std::string dump(const nlohmann::json& j);
};

}  // namespace airlock::mcp

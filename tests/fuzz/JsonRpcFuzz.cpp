// libFuzzer target: one MCP client message, as /mcp or `airlock mcp` reads
// it, then its arguments checked against a tool's input schema. Whatever
// the bytes: a typed message or an RpcError with a JSON-RPC code, never
// another exception; what is parsed renders again as one line.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "mcp/JsonRpc.hpp"
#include "mcp/ToolArguments.hpp"

using namespace airlock::mcp;
using nlohmann::json;

namespace {
const json& schema() {
    static const json s = json::parse(R"({
      "type": "object", "additionalProperties": false, "required": ["sandbox_id"],
      "properties": {
        "sandbox_id": {"type": "string", "maxLength": 64},
        "cmd": {"type": "array", "maxItems": 8, "items": {"type": "string"}},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "timeout_s": {"type": "integer", "minimum": 1, "maximum": 3600},
        "mode": {"type": "string", "enum": ["a", "b"]},
        "policy": {"type": "object", "properties": {"deny": {"type": "array", "items": {"type": "string"}}}}
      }})");
    return s;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        auto m = JsonRpc::parse(text);
        std::string line = m.isRequest() ? JsonRpc::result(m.id, m.params)
                                         : JsonRpc::notification(m.method.empty() ? "x" : m.method, m.params);
        if (line.find('\n') != std::string::npos) std::abort();
        if (m.params.contains("arguments")) ToolArguments::check(schema(), m.params["arguments"]);
    } catch (const RpcError& e) {
        if (e.code() > -32000 || e.code() < -32768) std::abort();
        if (std::string(e.what()).empty()) std::abort();
    }
    return 0;
}

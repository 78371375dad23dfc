#pragma once
#include <nlohmann/json.hpp>

namespace airlock::mcp {

// A tool call's arguments checked against the tool's input schema, in the
// subset of JSON Schema the tools are written in (type, properties,
// required, additionalProperties: false, enum, maxLength, minimum, maximum,
// maxItems, items). Throws RpcError(kInvalidParams) whose message names the
// argument and says what it must be: the model reads it and tries again.
class ToolArguments {
  public:
    static void check(const nlohmann::json& schema, const nlohmann::json& arguments);

  private:
    static void checkValue(const nlohmann::json& schema, const nlohmann::json& value,
                           const std::string& name, int depth);
};

}  // namespace airlock::mcp

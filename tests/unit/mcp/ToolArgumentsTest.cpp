#include "mcp/ToolArguments.hpp"

#include <gtest/gtest.h>

#include "mcp/JsonRpc.hpp"

namespace airlock::mcp {
namespace {
using nlohmann::json;

const json kSchema = json::parse(R"({
  "type": "object", "additionalProperties": false, "required": ["sandbox_id"],
  "properties": {
    "sandbox_id": {"type": "string", "maxLength": 64},
    "cmd": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    "timeout_s": {"type": "integer", "minimum": 1, "maximum": 3600},
    "decision": {"type": "string", "enum": ["approve", "deny"]},
    "policy": {"type": "object", "additionalProperties": false,
               "properties": {"deny": {"type": "array", "items": {"type": "string"}}}}
  }})");

std::string refusal(const json& args) {
    try {
        ToolArguments::check(kSchema, args);
    } catch (const RpcError& e) {
        EXPECT_EQ(e.code(), rpc::kInvalidParams);
        return e.what();
    }
    return "taken";
}

TEST(ToolArguments, WhatFitsIsTaken) {
    EXPECT_EQ(refusal({{"sandbox_id", "sbx-1"}}), "taken");
    EXPECT_EQ(refusal({{"sandbox_id", "sbx-1"},
                       {"cmd", {"sh", "-c", "x"}},
                       {"timeout_s", 30},
                       {"decision", "deny"},
                       {"policy", {{"deny", {"rm*"}}}}}),
              "taken");
}

// Each refusal names the argument and what it must be: the model reads it.
TEST(ToolArguments, EachRefusalNamesTheArgument) {
    EXPECT_EQ(refusal({{"sandbox_id", 42}}), "sandbox_id must be a string, got an integer 42");
    EXPECT_EQ(refusal(json::object()), "sandbox_id is required");
    EXPECT_EQ(refusal(json::array()), "arguments must be an object, got an array");
    EXPECT_NE(refusal({{"sandbox_id", "s"}, {"cmd", {"sh", 1}}}).find("cmd[1] must be a string"),
              std::string::npos);
    EXPECT_NE(refusal({{"sandbox_id", "s"}, {"cmd", json::array()}}).find("cmd needs at least 1"),
              std::string::npos);
    EXPECT_NE(refusal({{"sandbox_id", "s"}, {"timeout_s", 0}}).find("timeout_s must be at least 1"),
              std::string::npos);
    EXPECT_NE(refusal({{"sandbox_id", "s"}, {"timeout_s", 2.5}}).find("timeout_s must be an integer"),
              std::string::npos);
    EXPECT_NE(refusal({{"sandbox_id", "s"}, {"decision", "maybe"}}).find("decision must be one of"),
              std::string::npos);
    EXPECT_NE(refusal({{"sandbox_id", std::string(65, 'x')}}).find("sandbox_id is longer than 64"),
              std::string::npos);
    auto unknown = refusal({{"sandbox_id", "s"}, {"sandbox", "s"}});
    EXPECT_NE(unknown.find("unknown argument sandbox"), std::string::npos) << unknown;
    EXPECT_NE(unknown.find("known: "), std::string::npos) << unknown;
    EXPECT_NE(refusal({{"sandbox_id", "s"}, {"policy", {{"allow", {"x"}}}}})
                  .find("unknown argument policy.allow"),
              std::string::npos);
}

}  // namespace
}  // namespace airlock::mcp

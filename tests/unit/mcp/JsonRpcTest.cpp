#include "mcp/JsonRpc.hpp"

#include <gtest/gtest.h>

namespace airlock::mcp {
namespace {
using nlohmann::json;

int codeOf(const std::string& text) {
    try {
        JsonRpc::parse(text);
    } catch (const RpcError& e) {
        return e.code();
    }
    return 0;
}

TEST(JsonRpc, RequestsNotificationsAndResponsesAreTold) {
    auto r = JsonRpc::parse(R"({"jsonrpc":"2.0","id":0,"method":"tools/list"})");
    EXPECT_TRUE(r.isRequest());
    EXPECT_EQ(r.id, json(0)) << "id 0 is an id";
    EXPECT_EQ(r.method, "tools/list");
    EXPECT_TRUE(r.params.is_object() && r.params.empty());
    auto n = JsonRpc::parse(
        R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}})");
    EXPECT_EQ(n.kind, RpcMessage::Kind::notification);
    EXPECT_EQ(n.params["requestId"], "a");
    auto s = JsonRpc::parse(R"({"jsonrpc":"2.0","id":"x","result":{}})");
    EXPECT_EQ(s.kind, RpcMessage::Kind::response);
    EXPECT_EQ(s.id, json("x"));
}

// The table of what the specification names: -32700 for text that is not
// JSON, -32600 for JSON that is not one JSON-RPC message.
TEST(JsonRpc, BadMessagesGetTheCodesTheSpecificationNames) {
    EXPECT_EQ(codeOf(R"({"jsonrpc":"2.0","id":7,"method":)"), rpc::kParseError);
    EXPECT_EQ(codeOf(""), rpc::kParseError);
    EXPECT_EQ(codeOf(std::string(100, '[') + std::string(100, ']')), rpc::kParseError);
    EXPECT_EQ(codeOf(std::string(JsonRpc::kMaxMessageBytes + 1, ' ')), rpc::kParseError);
    EXPECT_EQ(codeOf(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])"), rpc::kInvalidRequest)
        << "no batches";
    EXPECT_EQ(codeOf("42"), rpc::kInvalidRequest);
    EXPECT_EQ(codeOf(R"({"id":1,"method":"ping"})"), rpc::kInvalidRequest);
    EXPECT_EQ(codeOf(R"({"jsonrpc":"1.0","id":1,"method":"ping"})"), rpc::kInvalidRequest);
    EXPECT_EQ(codeOf(R"({"jsonrpc":"2.0","id":null,"method":"ping"})"), rpc::kInvalidRequest);
    EXPECT_EQ(codeOf(R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})"), rpc::kInvalidRequest);
    EXPECT_EQ(codeOf(R"({"jsonrpc":"2.0","id":1,"method":""})"), rpc::kInvalidRequest);
    EXPECT_EQ(codeOf(R"({"jsonrpc":"2.0","id":1,"method":7})"), rpc::kInvalidRequest);
    EXPECT_EQ(codeOf(R"({"jsonrpc":"2.0","id":1,"method":"ping","params":[1]})"),
              rpc::kInvalidRequest);
    EXPECT_EQ(codeOf(R"({"jsonrpc":"2.0","id":1,"method":"ping","extra":1})"),
              rpc::kInvalidRequest);
    EXPECT_EQ(codeOf(R"({"jsonrpc":"2.0","id":1,"result":{},"error":{}})"), rpc::kInvalidRequest);
    EXPECT_EQ(codeOf(R"({"jsonrpc":"2.0","result":{}})"), rpc::kInvalidRequest);
    try {
        JsonRpc::parse(R"({"jsonrpc":"2.0","id":"q1","method":"ping","params":"x"})");
        FAIL() << "taken";
    } catch (const RpcError& e) {
        EXPECT_EQ(e.data(), json({{"id", "q1"}})) << "the id travels for the answer";
    }
}

TEST(JsonRpc, AnswersAreOneLineWithTheIdAsItCameAndNoNullId) {
    EXPECT_EQ(JsonRpc::result(json(3), {{"a", "x\ny"}}),
              R"({"id":3,"jsonrpc":"2.0","result":{"a":"x\ny"}})");
    EXPECT_EQ(JsonRpc::error(nullptr, rpc::kParseError, "bad"),
              R"({"error":{"code":-32700,"message":"bad"},"jsonrpc":"2.0"})");
    EXPECT_EQ(JsonRpc::error(json("i"), rpc::kInvalidParams, "m", {{"uri", "u"}}),
              R"({"error":{"code":-32602,"data":{"uri":"u"},"message":"m"},"id":"i","jsonrpc":"2.0"})");
    // Guest output need not be UTF-8: it is replaced, never thrown on.
    std::string line = JsonRpc::result(json(1), {{"stdout", std::string("a\xff\xfe")}});
    EXPECT_NE(line.find("a\xEF\xBF\xBD"), std::string::npos) << line;
}

}  // namespace
}  // namespace airlock::mcp

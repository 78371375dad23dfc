// The MCP server's protocol over a fake reply: sessions, versions, the
// transport's refusals, what each kind of message is answered with, and a
// cancel that comes before its call. Tools' REST calls go nowhere here (the
// SDK e2e test drives them against a real daemon).
#include "api/McpServer.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "../controller/ControllerFixture.hpp"

namespace airlock::api {
namespace {
using nlohmann::json;

// What the server answered: whole, or as events.
class FakeReply : public McpReply {
  public:
    void answer(ApiResponse r) override {
        std::lock_guard lock(m);
        response = std::move(r);
        done = true;
        cv.notify_all();
    }
    void openEvents() override {
        std::lock_guard lock(m);
        streaming = true;
    }
    bool send(const std::string& message) override {
        std::lock_guard lock(m);
        events.push_back(json::parse(message));
        return true;
    }
    void end() override {
        std::lock_guard lock(m);
        done = true;
        cv.notify_all();
    }
    void wait() {
        std::unique_lock lock(m);
        ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return done; }));
    }
    json body() const { return json::parse(response.body); }

    std::mutex m;
    std::condition_variable cv;
    bool done = false, streaming = false;
    ApiResponse response;
    std::vector<json> events;
};

class McpServerTest : public test::ControllerFixture {
  protected:
    McpServerTest() {
        caller.keyId = "key-1";
        caller.tenant = "t1";
        caller.role = Role::agent;
    }
    std::shared_ptr<FakeReply> post(const std::string& body, std::map<std::string, std::string> headers = {},
                                    const Principal* who = nullptr) {
        ApiRequest r;
        r.method = "POST";
        r.path = "/mcp";
        r.host = "127.0.0.1:8080";
        r.contentType = "application/json";
        r.body = body;
        r.headers = std::move(headers);
        auto reply = std::make_shared<FakeReply>();
        server.post(who ? *who : caller, r, reply);
        reply->wait();
        return reply;
    }
    std::string initialize(const std::string& version = "2025-11-25") {
        auto r = post(json{{"jsonrpc", "2.0"}, {"id", 0}, {"method", "initialize"},
                           {"params", {{"protocolVersion", version}, {"capabilities", json::object()},
                                       {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}}
                          .dump());
        EXPECT_EQ(r->response.status, 200);
        return r->response.headers["Mcp-Session-Id"];
    }

    Principal caller;
    McpTools tools{controller->frontDoorServices(),
                   [](const std::string&, const std::string&, const std::map<std::string, std::string>&,
                      const std::string&, std::chrono::steady_clock::time_point) {
                       return fleet::HttpAnswer{};  // unreachable
                   }};
    McpServer server{tools, "test"};
};

TEST_F(McpServerTest, InitializeNegotiatesTheVersionAndOpensTheKeysSession) {
    auto r = post(R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}})");
    EXPECT_EQ(r->body()["result"]["protocolVersion"], "2025-06-18");
    EXPECT_TRUE(r->body()["result"]["capabilities"].contains("tools"));
    EXPECT_EQ(r->response.headers["Mcp-Session-Id"].size(), 32u);
    auto newer = post(R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2099-01-01"}})");
    EXPECT_EQ(newer->body()["result"]["protocolVersion"], McpServer::kLatestVersion);
    auto none = post(R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}})");
    EXPECT_EQ(none->body()["error"]["code"], -32602);
}

TEST_F(McpServerTest, EachMessageGetsWhatTheTransportSays) {
    std::string session = initialize();
    std::map<std::string, std::string> in{{"mcp-session-id", session}};
    EXPECT_EQ(post(R"({"jsonrpc":"2.0","method":"notifications/initialized"})", in)->response.status, 202);
    auto ping = post(R"({"jsonrpc":"2.0","id":"p","method":"ping"})", in);
    EXPECT_EQ(ping->body(), json::parse(R"({"jsonrpc":"2.0","id":"p","result":{}})"));
    auto unknown = post(R"({"jsonrpc":"2.0","id":3,"method":"prompts/list"})", in);
    EXPECT_EQ(unknown->body()["error"]["code"], -32601);
    EXPECT_EQ(unknown->body()["id"], 3);
    auto listed = post(R"({"jsonrpc":"2.0","id":4,"method":"tools/list"})", in);
    auto listedBody = listed->body();  // held: a range over a temporary's member dangles
    for (const auto& t : listedBody["result"]["tools"])
        EXPECT_NE(t["name"], "decide_approval") << "an agent key is not offered it";
    auto badTool = post(R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope"}})", in);
    ASSERT_TRUE(badTool->streaming);
    ASSERT_EQ(badTool->events.size(), 1u);
    EXPECT_EQ(badTool->events[0]["error"]["code"], -32602);
    auto badArgs = post(
        R"({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"run_command","arguments":{"sandbox_id":42}}})",
        in);
    ASSERT_EQ(badArgs->events.size(), 1u);
    EXPECT_EQ(badArgs->events[0]["error"]["code"], -32602);
    EXPECT_NE(badArgs->events[0]["error"]["message"].get<std::string>().find("sandbox_id"), std::string::npos);
}

TEST_F(McpServerTest, TheTransportRefusesWhatItMust) {
    std::string session = initialize();
    const std::string ping = R"({"jsonrpc":"2.0","id":1,"method":"ping"})";
    EXPECT_EQ(post(ping, {{"origin", "http://evil.example"}, {"mcp-session-id", session}})->response.status, 403);
    EXPECT_EQ(post(ping, {{"origin", "http://127.0.0.1:8080"}, {"mcp-session-id", session}})->response.status, 200)
        << "its own Origin";
    EXPECT_EQ(post(ping, {{"accept", "text/html"}, {"mcp-session-id", session}})->response.status, 406);
    EXPECT_EQ(post(ping)->response.status, 400) << "no session";
    EXPECT_EQ(post(ping, {{"mcp-session-id", std::string(32, 'f')}})->response.status, 404);
    Principal other = caller;
    other.keyId = "key-2";
    EXPECT_EQ(post(ping, {{"mcp-session-id", session}}, &other)->response.status, 404)
        << "another key's session is unknown to it";
    EXPECT_EQ(post(ping, {{"mcp-session-id", session}, {"mcp-protocol-version", "1999-01-01"}})->response.status,
              400);
    auto broken = post(R"({"jsonrpc":"2.0","id":7,"method":)", {{"mcp-session-id", session}});
    EXPECT_EQ(broken->response.status, 400);
    EXPECT_EQ(broken->body()["error"]["code"], -32700);
    EXPECT_FALSE(broken->body().contains("id")) << "no id could be read: none is sent";
    ApiRequest del;
    del.headers["mcp-session-id"] = session;
    EXPECT_EQ(server.remove(other, del).status, 404);
    EXPECT_EQ(server.remove(caller, del).status, 204);
    EXPECT_EQ(post(ping, {{"mcp-session-id", session}})->response.status, 404) << "ended";
}

TEST_F(McpServerTest, ACancelThatCameFirstStopsTheCallBeforeItRuns) {
    std::string session = initialize();
    std::map<std::string, std::string> in{{"mcp-session-id", session}};
    EXPECT_EQ(post(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}})", in)
                  ->response.status,
              202);
    auto call = post(
        R"({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"list_sandboxes","arguments":{}}})", in);
    EXPECT_FALSE(call->streaming);
    EXPECT_EQ(call->body()["error"]["code"], -32600);
}

}  // namespace
}  // namespace airlock::api

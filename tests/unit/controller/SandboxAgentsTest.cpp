// SandboxAgents with real agents in process and a scripted hostile one: a
// session is watched from its hello on (a flood instead of a hello, or a
// broken frame later, is audited against the sandbox's tenant), reopened
// and watched again when it died, and refused with why once retired.
#include <gtest/gtest.h>

#include <atomic>
#include <list>

#include "agentclient/AgentProtocolError.hpp"
#include "controller/SandboxAgents.hpp"
#include "core/Error.hpp"
#include "store/Database.hpp"
#include "support/FakeGuest.hpp"
#include "support/InProcessAgent.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
using namespace std::chrono_literals;
using protocol::FrameType;

// Once the host speaks: data for a stream it never opened.
void breaksTheProtocolWhenPinged(test::FakeGuest& g) {
    protocol::Frame f;
    while (!g.stop_ && !(g.read(f, 100ms) && f.type == FrameType::ping)) {
    }
    g.send(FrameType::data, 4242, "x", 1);
    while (!g.stop_) std::this_thread::sleep_for(20ms);
}

class SandboxAgentsTest : public ::testing::Test {
  protected:
    SandboxAgentsTest() {
        SandboxRecord r;
        r.id = "sbx-0123456789abcdef";
        r.tenant = "t1";
        r.state = SandboxState::running;
        sandboxes.insert(r);
        sandbox = r;
    }

    std::vector<AuditEvent> protocolErrors() {
        AuditQuery q;
        q.type = "agent.protocol_error";
        return auditStore.query(sandbox.id, q);
    }

    test::TempDir dir;
    Database db{dir.path() + "/state.db"};
    SandboxStore sandboxes{db};
    AuditStore auditStore{db};
    AuditRecorder audit{auditStore};
    SandboxRecord sandbox;
    std::list<test::InProcessAgent> guests;
    std::atomic<int> connects{0};
    std::vector<std::string> endpoints;
    bool flood = false;
    bool hostileNext = false;  // the next session is a hostile guest's
    std::list<test::FakeGuest> hostile;
    SandboxAgents agents{SandboxAgents::Parts{
        [this](const std::string& endpoint,
               std::chrono::milliseconds) -> std::shared_ptr<AgentConnection> {
            ++connects;
            endpoints.push_back(endpoint);
            if (flood)
                throw AgentProtocolError("the agent sent 17 MiB without answering its hello");
            if (hostileNext) {
                hostileNext = false;
                hostile.emplace_back(breaksTheProtocolWhenPinged);
                return AgentConnection::fromFd(hostile.back().takeHostEnd(), 5s, {});
            }
            guests.emplace_back();
            return guests.back().connect();
        },
        [](const std::string& id) { return "/run/" + id + "/agent.sock"; }, sandboxes, audit,
        nullptr, nullptr, 2s, nullptr}};
};

TEST_F(SandboxAgentsTest, AFloodInsteadOfAHelloIsAuditedAgainstTheSandboxsTenant) {
    flood = true;
    EXPECT_THROW(agents.connect(sandbox.id, 1s), AgentProtocolError);
    auto errors = protocolErrors();
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0].tenant, "t1");
    auto data = nlohmann::json::parse(errors[0].dataJson);
    EXPECT_EQ(data["session_ended"], true);
    EXPECT_NE(data["reason"].get<std::string>().find("17 MiB"), std::string::npos);
    EXPECT_EQ(endpoints, std::vector<std::string>{"/run/" + sandbox.id + "/agent.sock"});
}

TEST_F(SandboxAgentsTest, AnAdoptedSessionIsTheSandboxsAndItsProtocolErrorsAreAudited) {
    test::FakeGuest guest(breaksTheProtocolWhenPinged);
    auto agent = AgentConnection::fromFd(guest.takeHostEnd(), 5s, {});
    agents.adopt(sandbox, agent);
    agent->ping(2s);  // answered with the hostile frame
    EXPECT_TRUE(test::waitFor([&] { return !protocolErrors().empty(); }, 5s))
        << "the adopted session was not watched";
    EXPECT_EQ(connects.load(), 0) << "an adopted session is used as it is";
    EXPECT_EQ(nlohmann::json::parse(protocolErrors()[0].dataJson)["session_ended"], true);
    EXPECT_EQ(agents.live(), 0u) << "the broken session ended";
}

TEST_F(SandboxAgentsTest, ADeadSessionIsReopenedOnItsEndpointAndWatchedAgain) {
    agents.adopt(sandbox, agents.connect(sandbox.id, 2s));
    auto first = agents.get(sandbox.id);
    EXPECT_EQ(connects.load(), 1);
    first->close();  // the agent restarted, say
    auto second = agents.get(sandbox.id);
    EXPECT_NE(second, first);
    EXPECT_EQ(connects.load(), 2);
    EXPECT_TRUE(second->ping(2s));
    EXPECT_EQ(agents.get(sandbox.id), second) << "a live session is kept";
    // The next reopened session is a hostile guest's: it is watched too.
    second->close();
    hostileNext = true;
    auto third = agents.get(sandbox.id);
    EXPECT_EQ(connects.load(), 3);
    third->ping(2s);
    EXPECT_TRUE(test::waitFor([&] { return !protocolErrors().empty(); }, 5s))
        << "a reopened session was not watched";
}

TEST_F(SandboxAgentsTest, ARetiredSandboxsCallsFailWithWhyUntilItIsForgotten) {
    agents.adopt(sandbox, agents.connect(sandbox.id, 2s));
    agents.retire(sandbox.id, "sandbox " + sandbox.id + " is gone: it was deleted");
    try {
        agents.get(sandbox.id);
        FAIL() << "a retired sandbox's session was handed out";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::conflict);
        EXPECT_NE(std::string(e.what()).find("it was deleted"), std::string::npos);
    }
    EXPECT_EQ(connects.load(), 1) << "nothing reconnects to a VM being destroyed";
    agents.forget(sandbox.id);
    EXPECT_TRUE(agents.get(sandbox.id)->ping(2s));
    EXPECT_EQ(connects.load(), 2);
}

}  // namespace
}  // namespace airlock

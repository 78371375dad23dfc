#include "agentclient/AgentTransport.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <thread>

#include "agentclient/AgentConnection.hpp"
#include "core/Error.hpp"
#include "support/InProcessAgent.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
using namespace std::chrono_literals;

TEST(AgentTransport, AutoPicksVsockOnlyWithVhostVsock) {
    EXPECT_EQ(resolveAgentTransport("auto", false), AgentTransportKind::serial);
    EXPECT_EQ(resolveAgentTransport("auto", true), AgentTransportKind::vsock);
    EXPECT_EQ(resolveAgentTransport("serial", true), AgentTransportKind::serial);
    EXPECT_EQ(resolveAgentTransport("vsock", true), AgentTransportKind::vsock);
    EXPECT_THROW(resolveAgentTransport("vsock", false), Error) << "asking for vsock without the device is an error";
    EXPECT_THROW(resolveAgentTransport("carrier-pigeon", true), Error);
    EXPECT_EQ(vsockEndpoint(7), "vsock:7:1024");
}

TEST(AgentTransport, UnixEndpointCarriesTheProtocol) {
    // A listening unix socket whose accepted connection is served by the real agent loop.
    test::TempDir dir;
    std::string path = dir.path() + "/agent.sock";
    int listener = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path.c_str());
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ::listen(listener, 1);
    std::unique_ptr<guest::Agent> agent;
    std::thread server([&] {
        agent = std::make_unique<guest::Agent>(UniqueFd(::accept(listener, nullptr, nullptr)));
        agent->run();
    });
    auto conn = connectAgent(path, 5s);
    EXPECT_TRUE(conn->ping(2s));
    protocol::ExecRequest r;
    r.argv = {"echo", "over-unix"};
    r.user = "root";
    EXPECT_EQ(conn->exec(r, 1024, 10s).stdoutData, "over-unix\n");
    ASSERT_TRUE(test::waitFor([&] { return agent != nullptr; }, 2s));
    agent->stop();
    server.join();
    ::close(listener);
}

TEST(AgentTransport, MissingEndpointsTimeOutWithAClearError) {
    try {
        connectAgent("/nonexistent/agent.sock", 200ms);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::agent_timeout);
        EXPECT_NE(std::string(e.what()).find("/nonexistent/agent.sock"), std::string::npos);
    }
    // No vhost-vsock here: a vsock endpoint never connects (or AF_VSOCK is absent).
    try {
        connectAgent(vsockEndpoint(12345), 200ms);
        FAIL();
    } catch (const Error& e) {
        EXPECT_TRUE(e.code() == ErrorCode::agent_timeout || e.code() == ErrorCode::unavailable) << e.what();
    }
}

}  // namespace
}  // namespace airlock

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "controller/GuestPorts.hpp"
#include "core/Error.hpp"
#include "core/UniqueFd.hpp"
#include "store/Database.hpp"
#include "support/FakeSandboxAccess.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

class GuestPortsTest : public ::testing::Test {
  protected:
    test::TempDir dir;
    Database db{dir.path() + "/state.db"};
    PortStore store{db};
    test::FakeSandboxAccess access;
    GuestPorts ports{access, store};
    const std::string& id() { return access.sandbox.id; }
};

TEST_F(GuestPortsTest, OnlyTheOwnerExposesListsAndClosesAPort) {
    EXPECT_EQ(test::codeOf([&] { ports.expose("t2", id(), 8000); }), ErrorCode::not_found);
    auto first = ports.expose("t1", id(), 8000);
    EXPECT_EQ(ports.expose("t1", id(), 8000).token, first.token)
        << "an exposed port keeps its token";
    EXPECT_EQ(test::codeOf([&] { ports.list("t2", id()); }), ErrorCode::not_found);
    EXPECT_EQ(ports.list("t1", id()).size(), 1u);
    EXPECT_EQ(test::codeOf([&] { ports.close("t2", id(), 8000); }), ErrorCode::not_found);
    ports.close("t1", id(), 8000);
    EXPECT_TRUE(ports.list("t1", id()).empty());
    EXPECT_EQ(test::codeOf([&] { ports.close("t1", id(), 8000); }), ErrorCode::not_found);
}

TEST_F(GuestPortsTest, APreviewOpensWithItsPortsTokenOnlyAndOnlyWhileRunning) {
    auto exposed = ports.expose("t1", id(), 8000);
    auto ignore = [](AgentStream::Event&&) {};
    EXPECT_EQ(test::codeOf([&] { ports.openPreview(id(), 8000, "wrong", ignore); }),
              ErrorCode::not_found);
    EXPECT_EQ(test::codeOf([&] { ports.openPreview(id(), 8001, exposed.token, ignore); }),
              ErrorCode::not_found)
        << "a token opens its own port alone";
    EXPECT_EQ(test::codeOf([&] {
                  ports.openPreview("sbx-zzzzzzzzzzzzzzzzzzzz", 8000, exposed.token, ignore);
              }),
              ErrorCode::not_found);
    access.sandbox.state = SandboxState::paused;
    EXPECT_EQ(test::codeOf([&] { ports.openPreview(id(), 8000, "wrong", ignore); }),
              ErrorCode::not_found)
        << "without the token nobody learns whether the sandbox runs";
    EXPECT_EQ(test::codeOf([&] { ports.openPreview(id(), 8000, exposed.token, ignore); }),
              ErrorCode::conflict);
}

TEST_F(GuestPortsTest, APreviewWithItsTokenReachesTheGuestsPort) {
    // The in-process agent's "guest" is this host: a listener of the test's own.
    UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_TRUE(listener);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(listener.get(), 1), 0);
    ASSERT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
    unsigned port = ntohs(a.sin_port);
    auto exposed = ports.expose("t1", id(), port);
    auto stream = ports.openPreview(id(), port, exposed.token, [](AgentStream::Event&&) {});
    pollfd p{listener.get(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 10000), 1) << "no connection reached the port";
    stream->reset("cancelled", "the test is done");
}

TEST_F(GuestPortsTest, ATunnelIsTheOwnersToAValidPortOfARunningSandbox) {
    auto ignore = [](AgentStream::Event&&) {};
    EXPECT_EQ(test::codeOf([&] { ports.openTunnel("t1", id(), 0, ignore); }),
              ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { ports.openTunnel("t1", id(), 70000, ignore); }),
              ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { ports.openTunnel("t2", id(), 8000, ignore); }),
              ErrorCode::not_found);
    access.sandbox.state = SandboxState::paused;
    EXPECT_EQ(test::codeOf([&] { ports.openTunnel("t1", id(), 8000, ignore); }),
              ErrorCode::conflict);
}

}  // namespace
}  // namespace airlock

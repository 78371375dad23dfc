#include <gtest/gtest.h>

#include "controller/GuestPorts.hpp"
#include "core/Error.hpp"
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
    EXPECT_EQ(test::codeOf([&] { ports.openPreview(id(), 8000, exposed.token, ignore); }),
              ErrorCode::conflict);
    access.sandbox.state = SandboxState::running;
    auto stream = ports.openPreview(id(), 8000, exposed.token, ignore);
    EXPECT_NE(stream, nullptr);
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

// How a node reaches another: TLS for https, plain http only on loopback
// unless the operator said the network is trusted.
#include <gtest/gtest.h>

#include "fleet/Fleet.hpp"
#include "fleet/HttpExchange.hpp"
#include "support/FakeKeyValueStore.hpp"
#include "support/TestEnv.hpp"

using namespace airlock;
using namespace airlock::fleet;

namespace {

struct FleetPeers : ::testing::Test {
    test::FakeKeyValueStore etcd;
    test::TempDir dir;
    NodeMembership membership{etcd, self(), dir.path() + "/lease", [] { return NodeCapacity{}; }};
    static NodeRecord self() {
        NodeRecord r;
        r.name = "node1";
        r.url = "http://127.0.0.1:8080";
        return r;
    }
};

TEST_F(FleetPeers, PlainHttpIsSpokenOnLoopbackOnlyUnlessTrusted) {
    Fleet strict(etcd, membership, NodeCredential(std::string(48, 'k')));
    auto local = strict.peerAt("http://127.0.0.2:8080");
    ASSERT_TRUE(local.has_value());
    EXPECT_EQ(local->host, "127.0.0.2");
    EXPECT_EQ(local->tls, nullptr);
    EXPECT_TRUE(strict.peerAt("http://[::1]:8080").has_value());
    EXPECT_FALSE(strict.peerAt("http://10.0.0.7:8080").has_value());
    EXPECT_FALSE(strict.peerAt("http://127.0.0.1.evil.example:8080").has_value());
    auto tls = strict.peerAt("https://10.0.0.7:8443");
    ASSERT_TRUE(tls.has_value());
    EXPECT_NE(tls->tls, nullptr);

    Fleet trusting(etcd, membership, NodeCredential(std::string(48, 'k')), nullptr, true);
    EXPECT_TRUE(trusting.peerAt("http://10.0.0.7:8080").has_value());
}

TEST(PlainHttpBeyondLoopback, NamesCleartextThatLeavesTheHost) {
    EXPECT_FALSE(plainHttpBeyondLoopback("http://127.0.0.1:1"));
    EXPECT_FALSE(plainHttpBeyondLoopback("http://localhost:1"));
    EXPECT_FALSE(plainHttpBeyondLoopback("http://[::1]:1"));
    EXPECT_FALSE(plainHttpBeyondLoopback("https://10.0.0.1:1"));
    EXPECT_TRUE(plainHttpBeyondLoopback("http://10.0.0.1:1"));
    EXPECT_TRUE(plainHttpBeyondLoopback("http://127.0.0:1"));
    EXPECT_TRUE(plainHttpBeyondLoopback("http://127.example:1"));
    EXPECT_TRUE(plainHttpBeyondLoopback("http://not a url"));
}

}  // namespace

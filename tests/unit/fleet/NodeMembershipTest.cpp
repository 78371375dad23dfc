// A node's membership: its lease, its record, the node list, over a fake
// store and over a real etcd member.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>

#include "core/Error.hpp"
#include "fleet/EtcdClient.hpp"
#include "fleet/NodeMembership.hpp"
#include "support/EtcdCluster.hpp"
#include "support/FakeKeyValueStore.hpp"
#include "support/TestEnv.hpp"

using namespace airlock;
using namespace airlock::fleet;
using namespace std::chrono_literals;

namespace {

NodeRecord nodeNamed(const std::string& name) {
    NodeRecord r;
    r.name = name;
    r.url = "http://127.0.0.1:1/" + name;
    r.version = "test";
    return r;
}

NodeMembership::Timing fast() {
    NodeMembership::Timing t;
    t.ttl = 3s;
    t.renewEvery = 50ms;
    t.nameWait = 300ms;
    return t;
}

std::optional<NodeStatus> statusOf(NodeMembership& m, const std::string& name) {
    for (auto& s : m.nodes())
        if (s.record.name == name) return s;
    return std::nullopt;
}

TEST(NodeMembership, AJoinedNodeIsListedUpWithItsCapacityUnderALease) {
    test::FakeKeyValueStore store;
    test::TempDir dir;
    std::atomic<unsigned> free{8};
    NodeMembership node(
        store, nodeNamed("node1"), dir.path() + "/lease",
        [&] {
            NodeCapacity c;
            c.vcpus = 8;
            c.freeVcpus = free.load();
            c.accel = "tcg";
            c.templates = {"minimal"};
            return c;
        },
        fast());
    node.join();
    auto s = statusOf(node, "node1");
    ASSERT_TRUE(s);
    EXPECT_TRUE(s->up);
    EXPECT_FALSE(s->draining);
    EXPECT_EQ(s->epoch, node.epoch());
    EXPECT_EQ(s->record.url, "http://127.0.0.1:1/node1");
    EXPECT_EQ(s->record.capacity.freeVcpus, 8u);
    EXPECT_EQ(s->record.capacity.templates, std::vector<std::string>{"minimal"});
    auto key = store.get(keys::kNodes + "node1");
    ASSERT_TRUE(key);
    EXPECT_NE(key->lease, 0);
    EXPECT_FALSE(node.fenced());
    // A changed capacity is published without waiting for a restart.
    free = 3;
    node.refresh();
    EXPECT_TRUE(test::waitFor(
        [&] {
            auto now = statusOf(node, "node1");
            return now && now->record.capacity.freeVcpus == 3u;
        },
        5s));
}

TEST(NodeMembership, ANodeWhoseLeaseRunsOutIsDownUntilItsRenewalJoinsAgainUnderANewEpoch) {
    test::FakeKeyValueStore store;
    test::TempDir dir;
    NodeMembership node(store, nodeNamed("node1"), dir.path() + "/lease", nullptr, fast());
    node.join();
    auto first = node.epoch();
    auto lease = store.get(keys::kNodes + "node1")->lease;
    store.expire(lease);
    auto s = statusOf(node, "node1");
    // Listed from its member record, not from a live key: down until it rejoins.
    EXPECT_TRUE(!s || !s->up || node.epoch() != first);
    EXPECT_TRUE(test::waitFor(
        [&] {
            auto now = statusOf(node, "node1");
            return now && now->up && node.epoch() > first;
        },
        5s));
}

TEST(NodeMembership, ANameALiveNodeHoldsIsRefused) {
    test::FakeKeyValueStore store;
    test::TempDir dir;
    NodeMembership first(store, nodeNamed("node1"), dir.path() + "/lease1", nullptr, fast());
    first.join();
    NodeMembership second(store, nodeNamed("node1"), dir.path() + "/lease2", nullptr, fast());
    try {
        second.join();
        FAIL() << "a second node took a live node's name";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::conflict);
    }
    EXPECT_TRUE(statusOf(first, "node1")->up);
}

TEST(NodeMembership, ARestartWithinTheLeaseKeepsItsEpoch) {
    test::FakeKeyValueStore store;
    test::TempDir dir;
    // What a SIGKILLed node leaves: its record under a live lease, and the
    // lease's id in its data dir.
    auto lease = store.grantLease(3s);
    store.put(keys::kNodes + "node1", nodeNamed("node1").toJson(), lease);
    auto created = store.get(keys::kNodes + "node1")->createRevision;
    {
        std::ofstream out(dir.path() + "/lease");
        out << lease << "\n";
    }
    NodeMembership restarted(store, nodeNamed("node1"), dir.path() + "/lease", nullptr, fast());
    restarted.join();
    EXPECT_EQ(restarted.epoch(), created);
    EXPECT_EQ(store.get(keys::kNodes + "node1")->lease, lease);
    // Another data dir's node (no saved lease) may not take the name.
    NodeMembership other(store, nodeNamed("node1"), dir.path() + "/other", nullptr, fast());
    EXPECT_THROW(other.join(), Error);
}

TEST(NodeMembership, LeavingRevokesTheLeaseAndTheNodeIsListedDown) {
    test::FakeKeyValueStore store;
    test::TempDir dir;
    NodeMembership watcher(store, nodeNamed("node2"), dir.path() + "/lease2", nullptr, fast());
    watcher.join();
    {
        NodeMembership node(store, nodeNamed("node1"), dir.path() + "/lease1", nullptr, fast());
        node.join();
        EXPECT_TRUE(statusOf(watcher, "node1")->up);
        node.leave();
        EXPECT_FALSE(std::ifstream(dir.path() + "/lease1").good());
    }
    auto s = statusOf(watcher, "node1");
    ASSERT_TRUE(s);
    EXPECT_FALSE(s->up);
    EXPECT_EQ(s->record.url, "http://127.0.0.1:1/node1");
}

TEST(NodeMembership, AnAdminsDrainIsShownOnTheNode) {
    test::FakeKeyValueStore store;
    test::TempDir dir;
    NodeMembership node(store, nodeNamed("node1"), dir.path() + "/lease", nullptr, fast());
    node.join();
    store.put(keys::kDraining + "node1", "{}");
    auto s = statusOf(node, "node1");
    ASSERT_TRUE(s);
    EXPECT_TRUE(s->draining);
    EXPECT_TRUE(s->record.draining);
}

TEST(NodeMembership, BadNodeNamesAreRefused) {
    test::FakeKeyValueStore store;
    for (const char* name : {"", "Node1", "-x", "a/b", "a b", "n\xc3\xa9"})
        EXPECT_THROW(NodeMembership(store, nodeNamed(name), "", nullptr), Error) << name;
    EXPECT_THROW(NodeMembership(store, nodeNamed(std::string(64, 'a')), "", nullptr), Error);
}

TEST(NodeMembership, AnUnreachableStoreFailsTheJoinClearly) {
    test::FakeKeyValueStore store;
    store.unavailable(true);
    NodeMembership node(store, nodeNamed("node1"), "", nullptr, fast());
    try {
        node.join();
        FAIL() << "joined without a store";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::unavailable);
    }
}

TEST(NodeMembershipEtcd, ANodeThatStopsRenewingIsGoneFromEtcdWithinItsTtl) {
    if (!test::EtcdCluster::available()) GTEST_SKIP() << "etcd is not installed";
    test::EtcdCluster cluster(1);
    EtcdClient etcd(cluster.clientUrls());
    test::TempDir dir;
    NodeMembership::Timing silent;
    silent.ttl = 2s;
    silent.renewEvery = 1h;  // as a SIGKILLed node: nothing renews
    NodeMembership node(etcd, nodeNamed("node1"), dir.path() + "/lease", nullptr, silent);
    node.join();
    ASSERT_TRUE(statusOf(node, "node1")->up);
    auto stopped = std::chrono::steady_clock::now();
    EXPECT_TRUE(test::waitFor([&] { return !statusOf(node, "node1")->up; }, 10s, 100ms));
    EXPECT_LT(std::chrono::steady_clock::now() - stopped, 6s);
    EXPECT_TRUE(node.fenced());
}

}  // namespace

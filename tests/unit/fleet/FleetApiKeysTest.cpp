// A fleet's API keys in its store: minted on one node, valid on all,
// revoked for all; hashes only; one first admin.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/Error.hpp"
#include "core/Sha256.hpp"
#include "fleet/FleetApiKeys.hpp"
#include "support/FakeKeyValueStore.hpp"
#include "support/TestEnv.hpp"

using namespace airlock;
using namespace airlock::fleet;

namespace {

TEST(FleetApiKeys, AKeyMintedThroughOneNodeIsValidThroughAnotherUntilRevoked) {
    test::FakeKeyValueStore store;
    FleetApiKeys node1(store), node3(store);
    auto created = node1.create("acme", Role::agent, "bot");
    auto seen = node3.findValid(created.key, 1000);
    ASSERT_TRUE(seen);
    EXPECT_EQ(seen->id, created.record.id);
    EXPECT_EQ(seen->tenant, "acme");
    EXPECT_EQ(seen->role, Role::agent);
    EXPECT_EQ(node3.find(created.record.id)->name, "bot");
    EXPECT_FALSE(node3.findValid(created.key + "x", 1000));
    EXPECT_FALSE(node3.findValid("", 1000));
    EXPECT_TRUE(node1.remove(created.record.id));
    EXPECT_FALSE(node3.findValid(created.key, 1000));
    EXPECT_FALSE(node3.find(created.record.id));
    EXPECT_FALSE(node1.remove(created.record.id));
    EXPECT_TRUE(node3.empty());
}

TEST(FleetApiKeys, TheStoreHoldsHashesNeverKeys) {
    test::FakeKeyValueStore store;
    FleetApiKeys keys(store);
    auto created = keys.create("acme", Role::admin, "ops");
    for (const auto& kv : store.list("/"))
        EXPECT_EQ((kv.key + kv.value).find(created.key), std::string::npos) << kv.key;
    EXPECT_TRUE(store.get("/airlock/keys/hash/" + sha256Hex(created.key)));
}

TEST(FleetApiKeys, ExpiredKeysAreInvalidAndNotCountedAsDriversOrAdmins) {
    test::FakeKeyValueStore store;
    FleetApiKeys keys(store);
    auto expiring = keys.create("acme", Role::admin, "short", 500);
    auto lasting = keys.create("acme", Role::agent, "long");
    keys.create("other", Role::agent, "theirs");
    keys.create("acme", Role::approver, "reviewer");
    EXPECT_TRUE(keys.findValid(expiring.key, 499));
    EXPECT_FALSE(keys.findValid(expiring.key, 500));
    EXPECT_EQ(keys.liveAdmins(499), 1u);
    EXPECT_EQ(keys.liveAdmins(500), 0u);
    auto drivers = keys.drivers("acme", 600);
    ASSERT_EQ(drivers.size(), 1u);
    EXPECT_EQ(drivers[0].id, lasting.record.id);
    EXPECT_EQ(keys.list(std::string("acme")).size(), 3u);
    EXPECT_EQ(keys.list(std::nullopt).size(), 4u);
}

TEST(FleetApiKeys, OfNodesStartingAtOnceExactlyOneMakesTheFirstAdminKey) {
    test::FakeKeyValueStore store;
    std::atomic<int> made{0};
    std::vector<std::thread> nodes;
    for (int i = 0; i < 4; ++i)
        nodes.emplace_back([&] {
            FleetApiKeys keys(store);
            if (keys.createFirstAdmin()) ++made;
        });
    for (auto& t : nodes) t.join();
    EXPECT_EQ(made.load(), 1);
    FleetApiKeys keys(store);
    EXPECT_EQ(keys.liveAdmins(0), 1u);
    EXPECT_FALSE(keys.createFirstAdmin());
    // Once every key is gone, a restart does not mint a new admin key: the
    // fleet had one (an operator mints the next through etcd's tooling).
    for (const auto& k : keys.list(std::nullopt)) keys.remove(k.id);
    EXPECT_FALSE(keys.createFirstAdmin());
}

TEST(FleetApiKeys, WithoutTheStoreAKeySeenLatelyHoldsAndAnUnseenOneIsUnavailable) {
    test::FakeKeyValueStore store;
    FleetApiKeys keys(store);
    auto seen = keys.create("acme", Role::agent, "bot");
    auto unseen = keys.create("acme", Role::agent, "other");
    auto revoked = keys.create("acme", Role::agent, "gone");
    ASSERT_TRUE(keys.findValid(seen.key, 0));
    ASSERT_TRUE(keys.findValid(revoked.key, 0));
    keys.remove(revoked.record.id);
    EXPECT_FALSE(keys.findValid(revoked.key, 0));
    store.unavailable(true);
    // Running sandboxes stay reachable with the keys that reached them.
    auto held = keys.findValid(seen.key, 0);
    ASSERT_TRUE(held);
    EXPECT_EQ(held->id, seen.record.id);
    EXPECT_FALSE(keys.findValid(revoked.key, 0)) << "seen revoked: stays revoked";
    EXPECT_EQ(test::codeOf([&] { keys.findValid(unseen.key, 0); }), ErrorCode::unavailable);
    EXPECT_EQ(test::codeOf([&] { keys.create("acme", Role::agent, "new"); }),
              ErrorCode::unavailable);
}

}  // namespace

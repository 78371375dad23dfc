// A tenant's usage across the fleet: creates on two nodes racing for the
// last unit of a quota, tenants set through one node and read through another.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/Error.hpp"
#include "fleet/FleetTenants.hpp"
#include "support/FakeKeyValueStore.hpp"
#include "support/TestEnv.hpp"

using namespace airlock;
using namespace airlock::fleet;

namespace {

SandboxRecord sandbox(const std::string& id, const std::string& tenant = "acme") {
    SandboxRecord r;
    r.id = id;
    r.tenant = tenant;
    r.vcpus = 2;
    r.memoryMib = 512;
    return r;
}

TenantQuota sandboxes(std::uint64_t n) {
    TenantQuota q;
    q.sandboxes = n;
    return q;
}

TEST(FleetUsage, TwoNodesRacingForTheLastUnitAdmitOneAndRefuseTheOther) {
    test::FakeKeyValueStore store;
    FleetUsage node1(store), node2(store);
    node1.reserve(sandbox("sbx-a"), sandboxes(2));
    // node1's create reads one in use, then node2's commits the last unit
    // before node1's transaction: node1 must read again and be refused.
    bool once = false;
    store.beforeTxn([&] {
        if (once) return;
        once = true;
        store.beforeTxn(nullptr);
        node2.reserve(sandbox("sbx-c"), sandboxes(2));
    });
    EXPECT_EQ(test::codeOf([&] { node1.reserve(sandbox("sbx-b"), sandboxes(2)); }),
              ErrorCode::quota_exceeded);
    auto u = node2.usageOf("acme");
    EXPECT_EQ(u.sandboxes, 2u);
    EXPECT_EQ(u.vcpus, 4u);
    EXPECT_EQ(u.memoryMib, 1024u);
}

TEST(FleetUsage, ManyConcurrentCreatesNeverTakeMoreThanTheQuota) {
    test::FakeKeyValueStore store;
    std::atomic<int> admitted{0}, refused{0};
    std::vector<std::thread> creates;
    for (int i = 0; i < 12; ++i)
        creates.emplace_back([&, i] {
            FleetUsage node(store);  // a node each
            try {
                node.reserve(sandbox("sbx-" + std::to_string(i)), sandboxes(5));
                ++admitted;
            } catch (const Error& e) {
                if (e.code() == ErrorCode::quota_exceeded) ++refused;
            }
        });
    for (auto& t : creates) t.join();
    EXPECT_EQ(admitted.load(), 5);
    EXPECT_EQ(refused.load(), 7);
    EXPECT_EQ(FleetUsage(store).usageOf("acme").sandboxes, 5u);
}

TEST(FleetUsage, ReleasedAndRenamedSandboxesCountOnce) {
    test::FakeKeyValueStore store;
    FleetUsage usage(store);
    usage.reserve(sandbox("sbx-a"), sandboxes(1));
    EXPECT_EQ(test::codeOf([&] { usage.reserve(sandbox("sbx-b"), sandboxes(1)); }),
              ErrorCode::quota_exceeded);
    usage.rename("acme", "sbx-a", "sbx-spare");
    EXPECT_EQ(usage.usageOf("acme").sandboxes, 1u);
    usage.release("acme", "sbx-spare");
    EXPECT_EQ(usage.usageOf("acme").sandboxes, 0u);
    EXPECT_NO_THROW(usage.reserve(sandbox("sbx-b"), sandboxes(1)));
    // Other tenants count apart; vCPU and memory quotas bind too.
    TenantQuota cpus;
    cpus.vcpus = 3;
    usage.reserve(sandbox("sbx-x", "beta"), cpus);
    EXPECT_EQ(test::codeOf([&] { usage.reserve(sandbox("sbx-y", "beta"), cpus); }),
              ErrorCode::quota_exceeded);
}

TEST(FleetTenants, ATenantSetThroughOneNodeIsReadThroughAnother) {
    test::FakeKeyValueStore store;
    FleetTenants node1(store), node3(store);
    TenantRecord t;
    t.name = "acme";
    t.quota.sandboxes = 2;
    t.deny = {"rm -rf *"};
    t.networkSet = true;
    t.networkAllow = {"*.example.com"};
    t.updatedAt = "2026-12-04T00:00:00Z";
    node1.put(t);
    auto seen = node3.find("acme");
    ASSERT_TRUE(seen);
    EXPECT_EQ(seen->quota.sandboxes, std::optional<std::uint64_t>(2));
    EXPECT_EQ(seen->deny, t.deny);
    EXPECT_TRUE(seen->networkSet);
    EXPECT_EQ(seen->networkAllow, t.networkAllow);
    EXPECT_EQ(node3.list().size(), 1u);
    EXPECT_FALSE(node3.find("nobody"));
    EXPECT_FALSE(node3.find("a/b"));
}

TEST(FleetUsage, AnUnreachableStoreRefusesTheCreateAsUnavailable) {
    test::FakeKeyValueStore store;
    store.unavailable(true);
    FleetUsage usage(store);
    EXPECT_EQ(test::codeOf([&] { usage.reserve(sandbox("sbx-a"), sandboxes(1)); }),
              ErrorCode::unavailable);
}

}  // namespace

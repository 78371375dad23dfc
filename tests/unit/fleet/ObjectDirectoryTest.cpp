// Where approvals and evidence bundles live in a fleet: found by id, gone
// with their sandbox or on their own.
#include <gtest/gtest.h>

#include <map>

#include "fleet/ObjectDirectory.hpp"
#include "support/FakeKeyValueStore.hpp"

using namespace airlock;
using namespace airlock::fleet;

TEST(ObjectDirectory, AnApprovalIsFoundByIdUntilItsSandboxIsDeleted) {
    test::FakeKeyValueStore etcd;
    ObjectDirectory approvals(etcd, "approvals");
    approvals.record("apr-one", {"acme", "node2", "sbx-a"});
    approvals.record("apr-two", {"acme", "node2", "sbx-a"});
    approvals.record("apr-three", {"acme", "node3", "sbx-b"});
    auto one = approvals.find("apr-one");
    ASSERT_TRUE(one.has_value());
    EXPECT_EQ(one->node, "node2");
    EXPECT_EQ(one->tenant, "acme");
    EXPECT_EQ(one->sandbox, "sbx-a");
    approvals.forgetSandbox("sbx-a");
    EXPECT_FALSE(approvals.find("apr-one").has_value());
    EXPECT_FALSE(approvals.find("apr-two").has_value());
    EXPECT_TRUE(approvals.find("apr-three").has_value()) << "another sandbox's stays";
    EXPECT_TRUE(etcd.list(approvals.bySandbox() + "sbx-a/").empty());
}

TEST(ObjectDirectory, IdsThatAreNoPlainNameReachNoKey) {
    test::FakeKeyValueStore etcd;
    ObjectDirectory approvals(etcd, "approvals");
    approvals.record("../x", {"acme", "node2", "sbx-a"});
    approvals.record("apr-x", {"acme", "node2", "sbx/../a"});
    EXPECT_TRUE(etcd.list("/airlock/").empty());
    EXPECT_FALSE(approvals.find("").has_value());
    EXPECT_FALSE(approvals.find("apr-one/../../sandboxes/x").has_value());
    etcd.put(approvals.prefix() + "apr-bad", "not json");
    EXPECT_FALSE(approvals.find("apr-bad").has_value());
}

TEST(ObjectDirectory, KindsKeepApartAndOneObjectIsForgottenAlone) {
    test::FakeKeyValueStore etcd;
    ObjectDirectory approvals(etcd, "approvals"), evidence(etcd, "evidence");
    EXPECT_EQ(approvals.prefix(), "/airlock/approvals/");
    evidence.record("evd-one", {"acme", "node1", "sbx-a"});
    evidence.record("evd-two", {"acme", "node1", "sbx-a"});
    EXPECT_FALSE(approvals.find("evd-one").has_value());
    evidence.forget("evd-one");
    EXPECT_FALSE(evidence.find("evd-one").has_value());
    EXPECT_TRUE(evidence.find("evd-two").has_value());
    EXPECT_TRUE(etcd.get(evidence.bySandbox() + "sbx-a/evd-two").has_value());
    EXPECT_FALSE(etcd.get(evidence.bySandbox() + "sbx-a/evd-one").has_value());
}

TEST(ObjectDirectory, ASandboxsBundlesAreFoundWhereverTheyWereSealed) {
    test::FakeKeyValueStore etcd;
    ObjectDirectory evidence(etcd, "evidence");
    evidence.record("evd-before", {"acme", "node1", "sbx-a"});
    evidence.record("evd-after", {"acme", "node2", "sbx-a"});
    evidence.record("evd-other", {"acme", "node1", "sbx-b"});
    auto sealed = evidence.ofSandbox("sbx-a");
    ASSERT_EQ(sealed.size(), 2u);
    std::map<std::string, std::string> nodes;
    for (const auto& [id, entry] : sealed) nodes[id] = entry.node;
    EXPECT_EQ(nodes, (std::map<std::string, std::string>{{"evd-after", "node2"},
                                                         {"evd-before", "node1"}}));
    EXPECT_TRUE(evidence.ofSandbox("sbx-a/../sbx-b").empty());
}

// Where approvals live in a fleet: found by id, gone with their sandbox.
#include <gtest/gtest.h>

#include "fleet/ApprovalDirectory.hpp"
#include "support/FakeKeyValueStore.hpp"

using namespace airlock;
using namespace airlock::fleet;

TEST(ApprovalDirectory, AnApprovalIsFoundByIdUntilItsSandboxIsDeleted) {
    test::FakeKeyValueStore etcd;
    ApprovalDirectory approvals(etcd);
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
    EXPECT_TRUE(etcd.list(ApprovalDirectory::kBySandbox + "sbx-a/").empty());
}

TEST(ApprovalDirectory, IdsThatAreNoPlainNameReachNoKey) {
    test::FakeKeyValueStore etcd;
    ApprovalDirectory approvals(etcd);
    approvals.record("../x", {"acme", "node2", "sbx-a"});
    approvals.record("apr-x", {"acme", "node2", "sbx/../a"});
    EXPECT_TRUE(etcd.list("/airlock/").empty());
    EXPECT_FALSE(approvals.find("").has_value());
    EXPECT_FALSE(approvals.find("apr-one/../../sandboxes/x").has_value());
    etcd.put(ApprovalDirectory::kPrefix + "apr-bad", "not json");
    EXPECT_FALSE(approvals.find("apr-bad").has_value());
}

// Brokered credentials in a fleet's etcd: one per name, a tenant's own.
#include <gtest/gtest.h>

#include "fleet/FleetCredentials.hpp"
#include "support/FakeKeyValueStore.hpp"

using namespace airlock;
using namespace airlock::fleet;

namespace {

CredentialRecord credential(const std::string& tenant, const std::string& name) {
    CredentialRecord c;
    c.tenant = tenant;
    c.name = name;
    c.kind = "https-token";
    c.host = "git.example";
    c.secretSealed = "v2:sealed";
    c.createdAt = "2026-12-05T00:00:00Z";
    c.scope = {"/org/"};
    return c;
}

TEST(FleetCredentials, OneRecordPerNameSetOnOneNodeReadOnAnother) {
    test::FakeKeyValueStore etcd;
    FleetCredentials node1(etcd), node2(etcd);
    EXPECT_TRUE(node1.insert(credential("acme", "gh")));
    EXPECT_FALSE(node2.insert(credential("acme", "gh"))) << "the name is taken fleet-wide";
    auto got = node2.find("acme", "gh");
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->secretSealed, "v2:sealed");
    EXPECT_EQ(got->scope, std::vector<std::string>{"/org/"});
    EXPECT_TRUE(node2.remove("acme", "gh"));
    EXPECT_FALSE(node1.find("acme", "gh").has_value());
    EXPECT_FALSE(node1.remove("acme", "gh"));
}

TEST(FleetCredentials, ATenantListsItsOwnAlone) {
    test::FakeKeyValueStore etcd;
    FleetCredentials creds(etcd);
    creds.insert(credential("a", "z"));
    creds.insert(credential("a", "b"));
    creds.insert(credential("ab", "c"));  // a prefix of "a/" it must not match
    auto listed = creds.list("a");
    ASSERT_EQ(listed.size(), 2u);
    EXPECT_EQ(listed[0].name, "b");
    EXPECT_EQ(listed[1].name, "z");
    // A record whose content names another tenant than its key is none.
    etcd.put(std::string(FleetCredentials::kPrefix) + "a/x",
             storedCredentialJson(credential("ab", "x")));
    EXPECT_FALSE(creds.find("a", "x").has_value());
    EXPECT_EQ(creds.list("a").size(), 2u);
    etcd.put(std::string(FleetCredentials::kPrefix) + "a/y", "not json");
    EXPECT_FALSE(creds.find("a", "y").has_value());
}

}  // namespace

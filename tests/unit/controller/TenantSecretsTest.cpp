// A tenant's injected secrets: kept sealed in either store, taken by the
// tenant's sandboxes at create and at each change.
#include <gtest/gtest.h>

#include "ControllerFixture.hpp"
#include "controller/TenantSecrets.hpp"
#include "fleet/FleetTenantSecrets.hpp"
#include "store/TenantSecretStore.hpp"
#include "support/FakeKeyValueStore.hpp"

namespace airlock {
namespace {

std::shared_ptr<const SecretCipher> tenantCipher() {
    std::array<unsigned char, 32> key{};
    key.fill(3);
    return std::make_shared<const SecretCipher>(key);
}

SecretSpec injected(const std::string& value, std::string header = "Authorization") {
    return SecretSpec{
        value, {}, SecretInjection{{"api.example.com"}, header, "Bearer {value}", ""}};
}

// The same contract over this host's database and a fleet's etcd.
void keepsSecretsSealedAndAnswersNoValue(TenantSecretRecords& store) {
    std::vector<std::pair<std::string, nlohmann::json>> audited;
    TenantSecrets secrets(
        store, tenantCipher(),
        [&](const std::string&, const std::string& type, const nlohmann::json& data) {
            audited.push_back({type, data});
        });
    EXPECT_TRUE(secrets.set("acme", "ORG_TOKEN", injected("first-Value-0001"), "key-1"));
    auto stored = store.find("acme", "ORG_TOKEN");
    ASSERT_TRUE(stored);
    EXPECT_EQ(stored->valueSealed.find("first-Value-0001"), std::string::npos);
    auto created = stored->createdAt;
    EXPECT_FALSE(secrets.set("acme", "ORG_TOKEN", injected("second-Value-002"), "key-1"))
        << "a replacement";
    EXPECT_EQ(store.find("acme", "ORG_TOKEN")->createdAt, created);

    auto listed = secrets.list("acme");
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_TRUE(listed[0].valueSealed.empty()) << "never answered, not even sealed";
    EXPECT_EQ(listed[0].hosts, std::vector<std::string>{"api.example.com"});
    EXPECT_TRUE(secrets.list("globex").empty()) << "another tenant has none";

    auto opened = secrets.secretsOf("acme");
    ASSERT_EQ(opened.count("ORG_TOKEN"), 1u);
    EXPECT_EQ(opened["ORG_TOKEN"].value, "second-Value-002");
    EXPECT_TRUE(opened["ORG_TOKEN"].fromTenant);
    ASSERT_TRUE(opened["ORG_TOKEN"].inject);
    EXPECT_EQ(opened["ORG_TOKEN"].inject->header, "Authorization");
    EXPECT_TRUE(opened["ORG_TOKEN"].inject->placeholder.empty()) << "each sandbox makes its own";

    // Sealed for its tenant and name: copied to another, it does not open.
    auto copy = *store.find("acme", "ORG_TOKEN");
    copy.tenant = "globex";
    store.put(copy);
    EXPECT_THROW(secrets.secretsOf("globex"), std::exception);
    store.remove("globex", "ORG_TOKEN");

    EXPECT_EQ(
        test::codeOf([&] { secrets.set("acme", "PLAIN", SecretSpec{"plain-Value-0003"}, "k"); }),
        ErrorCode::bad_request)
        << "a tenant's secret is always injected";
    EXPECT_EQ(test::codeOf([&] { secrets.set("acme", "SHORT", injected("short"), "k"); }),
              ErrorCode::unprocessable);
    EXPECT_TRUE(secrets.remove("acme", "ORG_TOKEN", "key-2"));
    EXPECT_FALSE(secrets.secretOf("acme", "ORG_TOKEN"));
    EXPECT_FALSE(secrets.remove("acme", "ORG_TOKEN", "key-2")) << "gone already, not audited again";

    std::vector<std::string> types;
    for (const auto& [type, data] : audited) {
        types.push_back(type);
        EXPECT_EQ(data.dump().find("Value-"), std::string::npos) << "no value in the record";
    }
    EXPECT_EQ(types, (std::vector<std::string>{"tenant_secret.created", "tenant_secret.replaced",
                                               "tenant_secret.removed"}));
}

TEST(TenantSecrets, KeptSealedInThisHostsDatabase) {
    test::TempDir dir;
    Database db(dir.path() + "/state.db");
    TenantSecretStore store(db);
    keepsSecretsSealedAndAnswersNoValue(store);
}

TEST(TenantSecrets, KeptSealedInAFleetsEtcdAndReadByEveryNode) {
    test::FakeKeyValueStore etcd;
    fleet::FleetTenantSecrets store(etcd);
    keepsSecretsSealedAndAnswersNoValue(store);
    fleet::FleetTenantSecrets node1(etcd), node2(etcd);
    TenantSecrets one(node1, tenantCipher()), two(node2, tenantCipher());
    one.set("acme", "ORG_TOKEN", injected("fleet-Value-0004"), "k");
    EXPECT_EQ(two.secretOf("acme", "ORG_TOKEN")->value, "fleet-Value-0004");
}

TEST(TenantSecrets, WithoutAKeyNoneIsKept) {
    test::FakeKeyValueStore etcd;
    fleet::FleetTenantSecrets store(etcd);
    TenantSecrets keyless(store, nullptr);
    EXPECT_EQ(test::codeOf([&] { keyless.set("acme", "T", injected("long-enough-Value"), "k"); }),
              ErrorCode::unavailable);
}

class TenantSecretsInSandboxes : public test::ControllerFixture {
  protected:
    TenantSecretsInSandboxes() : records(*db), secrets(records, tenantCipher()) {
        controller.reset();
        ControllerConfig config;
        config.dataDir = dir.path();
        config.execOutputCap = 4096;
        config.tenantSecrets = &secrets;
        controller = makeController(config);
    }
    SecretMap sealedIn(const std::string& id) {
        std::array<unsigned char, 32> key{};
        key.fill(7);  // the fixture's
        return SandboxSecrets(std::make_shared<const SecretCipher>(key)).open(*store->find(id));
    }
    int run(const std::string& id, const std::string& script) {
        ExecOptions o;
        o.argv = {"/bin/sh", "-c", script};
        o.user = "root";  // the in-process agent runs on the host
        return controller->commands().exec("t1", id, o).result.exit_code;
    }
    TenantSecretStore records;
    TenantSecrets secrets;
};

TEST_F(TenantSecretsInSandboxes, ACreateTakesThemWithItsOwnPlaceholderAndItsOwnSecretWins) {
    secrets.set("t1", "ORG_TOKEN", injected("tenant-Value-0005"), "k");
    secrets.set("t1", "SHARED", injected("shared-Value-0006"), "k");
    CreateSandboxRequest bare;
    bare.templateName = "minimal";
    auto a = controller->create("t1", bare);
    auto b = controller->create("t1", bare);
    CreateSandboxRequest own = bare;
    own.secrets["SHARED"] = SecretSpec{"own-Value-000007", {}};
    auto c = controller->create("t1", own);

    auto inA = sealedIn(a.id), inB = sealedIn(b.id), inC = sealedIn(c.id);
    ASSERT_TRUE(inA["ORG_TOKEN"].inject && inB["ORG_TOKEN"].inject);
    EXPECT_TRUE(inA["ORG_TOKEN"].fromTenant);
    EXPECT_EQ(inA["ORG_TOKEN"].inject->placeholder.rfind("airlock-secret-ORG_TOKEN-", 0), 0u);
    EXPECT_NE(inA["ORG_TOKEN"].inject->placeholder, inB["ORG_TOKEN"].inject->placeholder);
    EXPECT_FALSE(inC["SHARED"].fromTenant);
    EXPECT_EQ(inC["SHARED"].value, "own-Value-000007");
    EXPECT_EQ(run(a.id, "test \"$ORG_TOKEN\" = " + inA["ORG_TOKEN"].inject->placeholder), 0)
        << "the guest holds the placeholder, never the value";
    EXPECT_EQ(run(c.id, "test \"$SHARED\" = own-Value-000007"), 0);
    auto other = controller->create("t2", bare);
    EXPECT_TRUE(sealedIn(other.id).empty()) << "another tenant's sandbox gets none";
}

TEST_F(TenantSecretsInSandboxes, AChangeReachesTheTenantsRunningSandboxesButNotTheirOwn) {
    CreateSandboxRequest bare;
    bare.templateName = "minimal";
    auto a = controller->create("t1", bare);
    CreateSandboxRequest own = bare;
    own.secrets["ORG_TOKEN"] = SecretSpec{"own-Value-000008", {}};
    auto c = controller->create("t1", own);
    auto other = controller->create("t2", bare);

    secrets.set("t1", "ORG_TOKEN", injected("tenant-Value-0009"), "k");
    EXPECT_EQ(controller->applyTenantSecret("t1", "ORG_TOKEN"), 1u);
    auto placeholder = sealedIn(a.id)["ORG_TOKEN"].inject->placeholder;
    EXPECT_EQ(run(a.id, "test \"$ORG_TOKEN\" = " + placeholder), 0);
    EXPECT_EQ(sealedIn(c.id)["ORG_TOKEN"].value, "own-Value-000008");
    EXPECT_TRUE(sealedIn(other.id).empty());

    secrets.set("t1", "ORG_TOKEN", injected("rotated-Value-010"), "k");
    EXPECT_EQ(controller->applyTenantSecret("t1", "ORG_TOKEN"), 1u);
    EXPECT_EQ(sealedIn(a.id)["ORG_TOKEN"].value, "rotated-Value-010");
    EXPECT_EQ(sealedIn(a.id)["ORG_TOKEN"].inject->placeholder, placeholder)
        << "processes keep the placeholder they hold";

    secrets.remove("t1", "ORG_TOKEN", "k");
    EXPECT_EQ(controller->applyTenantSecret("t1", "ORG_TOKEN"), 1u);
    EXPECT_EQ(sealedIn(a.id).count("ORG_TOKEN"), 0u);
    EXPECT_EQ(store->find(a.id)->secretNames, std::vector<std::string>{});
    EXPECT_EQ(run(a.id, "test -z \"$ORG_TOKEN\""), 0);
    EXPECT_EQ(sealedIn(c.id)["ORG_TOKEN"].value, "own-Value-000008");
    EXPECT_EQ(controller->applyTenantSecret("t1", "ORG_TOKEN"), 0u) << "nothing left to change";
}

TEST_F(TenantSecretsInSandboxes, AForkKeepsItsSourcesPlaceholderAndTakesTheCurrentValue) {
    secrets.set("t1", "ORG_TOKEN", injected("tenant-Value-0011"), "k");
    CreateSandboxRequest bare;
    auto src = controller->create("t1", bare);
    auto snap = controller->snapshot("t1", src.id);
    secrets.set("t1", "ORG_TOKEN", injected("rotated-Value-012"), "k");
    CreateSandboxRequest fork;
    fork.snapshot = snap.id;
    fork.settingsFrom = src.id;
    auto forked = controller->create("t1", fork);
    auto was = sealedIn(src.id)["ORG_TOKEN"], now = sealedIn(forked.id)["ORG_TOKEN"];
    EXPECT_EQ(now.inject->placeholder, was.inject->placeholder)
        << "the fork's processes came from the source's memory";
    EXPECT_EQ(now.value, "rotated-Value-012");
    EXPECT_TRUE(now.fromTenant);
}

}  // namespace
}  // namespace airlock

#include <gtest/gtest.h>

#include <regex>

#include "api/Authenticator.hpp"
#include "store/ApiKeyStore.hpp"
#include "core/Error.hpp"
#include "core/Sha256.hpp"
#include "store/Database.hpp"
#include "support/TestEnv.hpp"

namespace airlock::api {
namespace {

class AuthenticatorTest : public ::testing::Test {
  protected:
    test::TempDir dir;
    Database db{dir.path() + "/state.db"};
    ApiKeyStore keys{db};
    Authenticator auth{keys};
};

TEST_F(AuthenticatorTest, NewKeysAreAkAndHexSoE2bSdksAcceptThemWithTheirPrefix) {
    auto created = keys.create("acme", Role::agent, "ci");
    EXPECT_TRUE(std::regex_match(created.key, std::regex("^ak_[0-9a-f]{40,}$"))) << created.key;
    EXPECT_NE(keys.create("acme", Role::agent, "ci").key, created.key);
    auto bearer = auth.principalFor("Bearer " + created.key);
    EXPECT_EQ(bearer.tenant, "acme");
    EXPECT_EQ(bearer.role, Role::agent);
    // The E2B front door: the key as is, or with e2b_ for ak_: the same key.
    std::string e2b = "e2b_" + created.key.substr(3);
    EXPECT_TRUE(std::regex_match(e2b, std::regex("^e2b_[0-9a-f]+$")));
    auto viaE2b = auth.principalForE2bKey(e2b);
    EXPECT_EQ(viaE2b.keyId, bearer.keyId);
    EXPECT_EQ(viaE2b.role, Role::agent);
    EXPECT_EQ(auth.principalForE2bKey(created.key).keyId, bearer.keyId);
    // e2b_ is only an alias on that door, and only for a real key.
    EXPECT_EQ(test::codeOf([&] { auth.principalFor("Bearer " + e2b); }), ErrorCode::unauthorized);
    EXPECT_EQ(test::codeOf([&] { auth.principalForE2bKey("e2b_" + std::string(48, '0')); }),
              ErrorCode::unauthorized);
    EXPECT_EQ(test::codeOf([&] { auth.principalForE2bKey(""); }), ErrorCode::unauthorized);
    // A revoked key stops working on both doors at once.
    keys.remove(bearer.keyId);
    EXPECT_EQ(test::codeOf([&] { auth.principalForE2bKey(e2b); }), ErrorCode::unauthorized);
}

TEST_F(AuthenticatorTest, KeysMintedBeforeTheHexFormatKeepWorking) {
    keys.create("acme", Role::admin, "first");  // the table exists
    const std::string old = "ak_k3jq7w2m5x8p4r6t9v2b5n7c3d6f8g2h4j6k8m3n5p7q9s2t4v6w8";
    db.exec(
        "INSERT INTO api_keys (key_hash, id, tenant, role, label, created_at, expires_at) VALUES "
        "('" +
        sha256Hex(old) + "', 'key-old', 'acme', 'approver', 'old', '2026-01-01T00:00:00.000Z', 0)");
    auto p = auth.principalFor("Bearer " + old);
    EXPECT_EQ(p.keyId, "key-old");
    EXPECT_EQ(p.role, Role::approver);
    EXPECT_EQ(auth.principalForE2bKey(old).keyId, "key-old");
}

}  // namespace
}  // namespace airlock::api

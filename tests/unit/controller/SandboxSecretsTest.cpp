#include <gtest/gtest.h>

#include "controller/SandboxSecrets.hpp"
#include "core/Error.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

std::shared_ptr<const SecretCipher> cipher() {
    std::array<unsigned char, 32> key{};
    for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<unsigned char>(i * 7 + 1);
    return std::make_shared<const SecretCipher>(key);
}

SandboxRecord sandboxWith(const SandboxSecrets& secrets, const std::string& id,
                          const SecretMap& map) {
    SandboxRecord r;
    r.id = id;
    r.tenant = "t1";
    r.secretsSealed = secrets.seal(map, id);
    return r;
}

TEST(SandboxSecrets, SealedSecretsOpenOnlyForTheSandboxTheyWereSealedFor) {
    SandboxSecrets secrets(cipher());
    auto r = sandboxWith(secrets, "sbx-a", {{"TOKEN", {"t0ken-Value-1", {}}}});
    EXPECT_EQ(r.secretsSealed.find("t0ken-Value-1"), std::string::npos);
    EXPECT_EQ(secrets.open(r).at("TOKEN").value, "t0ken-Value-1");
    SandboxRecord copied = r;
    copied.id = "sbx-b";  // the sealed column copied onto another record
    EXPECT_EQ(test::codeOf([&] { secrets.open(copied); }), ErrorCode::internal);
    // A clone taking another id gets them sealed again, for that id alone.
    copied.secretsSealed = secrets.reseal(r.secretsSealed, "sbx-a", "sbx-b");
    EXPECT_EQ(secrets.open(copied).at("TOKEN").value, "t0ken-Value-1");
    EXPECT_EQ(test::codeOf([&] { secrets.reseal(r.secretsSealed, "sbx-b", "sbx-c"); }),
              ErrorCode::internal);
}

TEST(SandboxSecrets, WithoutAKeyOrWithAnUnmaskableValueNothingIsSealed) {
    SandboxSecrets keyless(nullptr);
    EXPECT_EQ(test::codeOf([&] {
                  keyless.seal({{"T", {"long-enough", {}}}}, "sbx-a");
              }),
              ErrorCode::bad_request);
    SandboxRecord none;
    none.id = "sbx-a";
    EXPECT_TRUE(keyless.open(none).empty());
    SandboxSecrets secrets(cipher());
    EXPECT_EQ(test::codeOf([&] {
                  secrets.seal({{"T", {"abc1234", {}}}}, "sbx-a");
              }),
              ErrorCode::unprocessable)
        << "7 bytes: too short to mask without editing ordinary text";
}

TEST(SandboxSecrets, ACommandGetsOnlyTheSecretsScopedToIt) {
    SecretMap map{{"ALL", {"every-Command-1", {}}}, {"DEPLOY", {"deploy-Key-2", {"deploy *"}}}};
    auto plain = SandboxSecrets::envFor(map, "ls -la");
    EXPECT_EQ(plain.size(), 1u);
    EXPECT_EQ(plain.at("ALL"), "every-Command-1");
    auto deploy = SandboxSecrets::envFor(map, "deploy prod");
    EXPECT_EQ(deploy.at("DEPLOY"), "deploy-Key-2");
    EXPECT_EQ(deploy.size(), 2u);
}

TEST(SandboxSecrets, HostTextHidesTheSecretsAndTheExtraValuesEvenWhenTheSourceFails) {
    SandboxSecrets secrets(cipher());
    auto r = sandboxWith(secrets, "sbx-a", {{"TOKEN", {"t0ken-Value-1", {}}}});
    secrets.setExtraSource([](const SandboxRecord& s) {
        return std::vector<std::string>{"git-Credential-" + s.tenant};
    });
    EXPECT_EQ(secrets.hostTextMasker(r).mask("t0ken-Value-1 git-Credential-t1"), "*** ***");
    secrets.setExtraSource([](const SandboxRecord&) -> std::vector<std::string> {
        throw std::runtime_error("the credential store is gone");
    });
    EXPECT_EQ(secrets.hostTextMasker(r).mask("t0ken-Value-1 git-Credential-t1"),
              "*** git-Credential-t1");
}

// Attack 1: the guest's output masker holds the values the guest was given
// and nothing else; a host-only value is never compared with guest output.
TEST(SandboxSecrets, GuestOutputIsMaskedWithTheGuestsSecretsOnly) {
    SandboxSecrets secrets(cipher());
    auto r = sandboxWith(secrets, "sbx-a", {{"TOKEN", {"t0ken-Value-1", {}}}});
    bool asked = false;
    secrets.setExtraSource([&](const SandboxRecord& s) {
        asked = true;
        return std::vector<std::string>{"git-Credential-" + s.tenant};
    });
    auto guest = secrets.guestOutputMasker(r);
    EXPECT_FALSE(asked) << "the host-only values are not even looked up";
    EXPECT_EQ(guest.mask("t0ken-Value-1 git-Credential-t1"), "*** git-Credential-t1");
    EXPECT_EQ(guest.needles(), SecretMasker({"t0ken-Value-1"}).needles());
}

TEST(SandboxSecrets, AParkedRequestIsSealedWhenItsSandboxHasSecrets) {
    SandboxSecrets secrets(cipher());
    std::string request = R"({"cmd":"curl -H 'x: t0ken-Value-1'"})";
    SandboxRecord plain;
    plain.id = "sbx-p";
    GatedExec g;
    g.id = "ex-1";
    g.sandboxId = "sbx-p";
    g.requestJson = secrets.sealRequest(plain, request);
    EXPECT_EQ(g.requestJson, request);
    EXPECT_EQ(secrets.openRequest(g)["cmd"], "curl -H 'x: t0ken-Value-1'");

    auto r = sandboxWith(secrets, "sbx-a", {{"TOKEN", {"t0ken-Value-1", {}}}});
    g.sandboxId = "sbx-a";
    g.requestJson = secrets.sealRequest(r, request);
    EXPECT_EQ(g.requestJson.find("t0ken"), std::string::npos) << g.requestJson;
    EXPECT_EQ(secrets.openRequest(g)["cmd"], "curl -H 'x: t0ken-Value-1'");
    SandboxSecrets keyless(nullptr);
    EXPECT_EQ(test::codeOf([&] { keyless.openRequest(g); }), ErrorCode::internal);
}

}  // namespace
}  // namespace airlock

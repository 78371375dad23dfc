#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include "core/Error.hpp"
#include "core/SecretCipher.hpp"
#include "evidence/Dsse.hpp"
#include "evidence/EvidenceKey.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

void writeFile(const std::string& path, const std::string& data) {
    std::ofstream(path, std::ios::binary) << data;
}

TEST(EvidenceKey, IsMadeOnFirstUsePrivateAndStableAcrossLoads) {
    test::TempDir dir;
    std::string keys = dir.path() + "/keys";
    auto first = EvidenceKey::loadOrCreate(keys);
    struct stat st {};
    ASSERT_EQ(::stat((keys + "/active.pem").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    ASSERT_EQ(::stat(keys.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    auto again = EvidenceKey::loadOrCreate(keys);
    EXPECT_EQ(first.keyid(), again.keyid());
    EXPECT_EQ(first.keyid().size(), 64u);
    EXPECT_EQ(EvidenceKey::keyidOf(first.publicKeyPem()), first.keyid());
    auto list = EvidenceKey::list(keys);
    ASSERT_EQ(list.size(), 1u);
    EXPECT_TRUE(list[0].active);
    EXPECT_EQ(list[0].alg, "ecdsa-p256-sha256");
    EXPECT_EQ(list[0].publicKeyPem.find("PRIVATE"), std::string::npos);
}

TEST(EvidenceKey, AKeyReadableByOthersIsRefused) {
    test::TempDir dir;
    std::string keys = dir.path() + "/keys";
    EvidenceKey::loadOrCreate(keys);
    ::chmod((keys + "/active.pem").c_str(), 0644);
    EXPECT_EQ(test::codeOf([&] { EvidenceKey::loadOrCreate(keys); }), ErrorCode::internal);
}

TEST(EvidenceKey, SignaturesVerifyWithTheOpensslCliAndNothingElseVerifies) {
    test::TempDir dir;
    auto key = EvidenceKey::loadOrCreate(dir.path() + "/keys");
    std::string data = "0123  SHA256SUMS content\n";
    std::string sig = key.sign(data);
    EXPECT_TRUE(EvidenceKey::verify(key.publicKeyPem(), data, sig));
    EXPECT_FALSE(EvidenceKey::verify(key.publicKeyPem(), data + "x", sig));
    std::string flipped = sig;
    flipped[flipped.size() / 2] ^= 1;
    EXPECT_FALSE(EvidenceKey::verify(key.publicKeyPem(), data, flipped));
    EXPECT_FALSE(EvidenceKey::verify("not a key", data, sig));
    auto other = EvidenceKey::loadOrCreate(dir.path() + "/other");
    EXPECT_FALSE(EvidenceKey::verify(other.publicKeyPem(), data, sig));

    // The contract: `openssl dgst -sha256 -verify` accepts it as it is.
    writeFile(dir.path() + "/data", data);
    writeFile(dir.path() + "/data.sig", sig);
    writeFile(dir.path() + "/pub.pem", key.publicKeyPem());
    EXPECT_NE(
        test::commandOutput("openssl dgst -sha256 -verify " + dir.path() + "/pub.pem -signature " +
                            dir.path() + "/data.sig " + dir.path() + "/data 2>&1")
            .find("Verified OK"),
        std::string::npos);
    // And the keyid is the sha256 of the DER public key, as openssl computes it.
    std::string der = test::commandOutput("openssl pkey -pubin -in " + dir.path() +
                                          "/pub.pem -outform DER | sha256sum");
    EXPECT_EQ(der.substr(0, 64), key.keyid());
}

TEST(EvidenceKey, RotationKeepsOldPublicKeysListedAndSigning) {
    test::TempDir dir;
    std::string keys = dir.path() + "/keys";
    auto first = EvidenceKey::loadOrCreate(keys);
    std::string oldSig = first.sign("bundle");
    auto second = EvidenceKey::rotate(keys);
    EXPECT_NE(first.keyid(), second.keyid());
    EXPECT_EQ(EvidenceKey::loadOrCreate(keys).keyid(), second.keyid())
        << "the new key is the active one";
    auto list = EvidenceKey::list(keys);
    ASSERT_EQ(list.size(), 2u);
    EXPECT_FALSE(list[0].active);
    EXPECT_FALSE(list[0].retiredAt.empty());
    EXPECT_TRUE(list[1].active);
    // A bundle signed before the rotation still verifies with the listed key.
    EXPECT_TRUE(EvidenceKey::verify(list[0].publicKeyPem, "bundle", oldSig));
}

TEST(Dsse, EnvelopesVerifyAndAChangedPayloadOrTypeDoesNot) {
    test::TempDir dir;
    auto key = EvidenceKey::loadOrCreate(dir.path() + "/keys");
    EXPECT_EQ(dsse::pae("t", "body"), "DSSEv1 1 t 4 body");
    std::string statement = R"({"_type":"https://in-toto.io/Statement/v1"})";
    auto env = dsse::sign(key, dsse::kInTotoPayloadType, statement);
    EXPECT_EQ(env["signatures"][0]["keyid"], key.keyid());
    EXPECT_EQ(dsse::verify(env, key.publicKeyPem()), statement);
    auto changed = env;
    changed["payload"] = base64Encode(statement + " ");
    EXPECT_EQ(test::codeOf([&] { dsse::verify(changed, key.publicKeyPem()); }),
              ErrorCode::bad_request);
    changed = env;
    changed["payloadType"] = "application/json";
    EXPECT_EQ(test::codeOf([&] { dsse::verify(changed, key.publicKeyPem()); }),
              ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { dsse::verify(nlohmann::json::array(), key.publicKeyPem()); }),
              ErrorCode::bad_request);

    // The openssl recipe docs/evidence.md gives: PAE bytes, the decoded sig.
    writeFile(dir.path() + "/pae.bin", dsse::pae(dsse::kInTotoPayloadType, statement));
    writeFile(dir.path() + "/sig.bin",
              base64Decode(env["signatures"][0]["sig"].get<std::string>()));
    writeFile(dir.path() + "/pub.pem", key.publicKeyPem());
    EXPECT_NE(
        test::commandOutput("openssl dgst -sha256 -verify " + dir.path() + "/pub.pem -signature " +
                            dir.path() + "/sig.bin " + dir.path() + "/pae.bin 2>&1")
            .find("Verified OK"),
        std::string::npos);
}

}  // namespace
}  // namespace airlock

#include "core/SecretCipher.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/Error.hpp"
#include "core/SecretMasker.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

TEST(SecretCipher, SealsOpensAndRefusesTampering) {
    std::array<unsigned char, 32> key{};
    key.fill(1);
    SecretCipher cipher(key);
    auto sealed = cipher.seal("s3cr3t-Value-9137");
    EXPECT_EQ(sealed.rfind("v1:", 0), 0u);
    EXPECT_EQ(sealed.find("s3cr3t"), std::string::npos);
    EXPECT_NE(cipher.seal("s3cr3t-Value-9137"), sealed) << "a fresh nonce each time";
    EXPECT_EQ(cipher.open(sealed), "s3cr3t-Value-9137");
    std::string tampered = sealed;
    tampered[10] = tampered[10] == 'A' ? 'B' : 'A';
    EXPECT_THROW(cipher.open(tampered), Error);
    key.fill(2);
    EXPECT_THROW(SecretCipher(key).open(sealed), Error) << "another key cannot open it";
    EXPECT_EQ(cipher.open(cipher.seal("")), "");
}

TEST(SecretCipher, ABoundBlobOpensOnlyForItsOwner) {
    std::array<unsigned char, 32> key{};
    key.fill(3);
    SecretCipher cipher(key);
    auto sealed = cipher.seal("value-of-a", "sbx-aaaa");
    EXPECT_EQ(cipher.open(sealed, "sbx-aaaa"), "value-of-a");
    EXPECT_THROW(cipher.open(sealed, "sbx-bbbb"), Error) << "copied to another sandbox's record";
    EXPECT_THROW(cipher.open(sealed), Error) << "opened without its binding";
    EXPECT_THROW(cipher.open(cipher.seal("unbound"), "sbx-aaaa"), Error) << "an unbound blob where a binding is asked";
}

TEST(SecretCipher, KeyFileIsMadeOnceWithMode0600) {
    test::TempDir dir;
    std::string file = dir.path() + "/secret.key";
    ::unsetenv("AIRLOCK_SECRET_KEY");
    auto first = SecretCipher::fromEnvironmentOrFile(file);
    EXPECT_EQ(std::filesystem::status(file).permissions() & std::filesystem::perms::all,
              std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    auto again = SecretCipher::fromEnvironmentOrFile(file);
    EXPECT_EQ(again.open(first.seal("value")), "value") << "the same key after a restart";
    std::ofstream(file, std::ios::trunc) << "junk\n";
    EXPECT_THROW(SecretCipher::fromEnvironmentOrFile(file), Error);
}

TEST(SecretMasker, MasksTheValueAndItsEncodings) {
    SecretMasker masker({"s3cr3t-Value-9137", "ab"});
    EXPECT_EQ(masker.mask("token=s3cr3t-Value-9137 end"), "token=*** end");
    EXPECT_EQ(masker.mask(base64Encode("s3cr3t-Value-9137")), "***");
    EXPECT_EQ(masker.mask("733363723374"), "733363723374") << "hex of a prefix is not the secret";
    std::string hex;
    for (unsigned char c : std::string("s3cr3t-Value-9137")) {
        static const char* d = "0123456789abcdef";
        hex += d[c >> 4];
        hex += d[c & 15];
    }
    EXPECT_EQ(masker.mask("x" + hex + "x"), "x***x");
    EXPECT_EQ(masker.mask("ab cab"), "ab cab") << "values under 4 bytes are not masked (and refused by the API)";
    EXPECT_EQ(base64Decode(base64Encode("any\0bytes")), std::string("any\0bytes"));
}

}  // namespace
}  // namespace airlock

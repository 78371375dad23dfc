// A sandbox's egress CA: leaves that chain to it for exactly their host,
// cached, never for what is not a host; a reloaded CA mints what the guest
// already trusts; another sandbox's CA vouches for none of them.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>
#include <vector>

#include "core/Error.hpp"
#include "egress/SandboxCa.hpp"

namespace airlock::egress {
namespace {

// Whether `leaf` verifies under `ca` alone, with OpenSSL's strict checks.
bool chainsTo(X509* leaf, X509* ca) {
    std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(),
                                                                  X509_STORE_free);
    X509_STORE_add_cert(store.get(), ca);
    std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(X509_STORE_CTX_new(),
                                                                        X509_STORE_CTX_free);
    X509_STORE_CTX_init(ctx.get(), store.get(), leaf, nullptr);
    X509_STORE_CTX_set_flags(ctx.get(), X509_V_FLAG_X509_STRICT);
    X509_STORE_CTX_set_purpose(ctx.get(), X509_PURPOSE_SSL_SERVER);
    return X509_verify_cert(ctx.get()) == 1;
}

TEST(SandboxCa, ALeafChainsToItsCaForExactlyItsHost) {
    auto ca = SandboxCa::create("sbx-test", std::chrono::hours(24));
    EXPECT_EQ(X509_check_ca(ca->certificate()), 1);
    EXPECT_NE(ca->certificatePem().find("BEGIN CERTIFICATE"), std::string::npos);
    EXPECT_EQ(ca->certificatePem().find("PRIVATE"), std::string::npos);
    auto leaf = ca->leafFor("API.Example.com.");
    EXPECT_EQ(leaf->host(), "api.example.com");
    EXPECT_TRUE(chainsTo(leaf->certificate(), ca->certificate()));
    EXPECT_EQ(X509_check_host(leaf->certificate(), "api.example.com", 0, 0, nullptr), 1);
    EXPECT_NE(X509_check_host(leaf->certificate(), "other.example.com", 0, 0, nullptr), 1);
    EXPECT_NE(X509_check_host(leaf->certificate(), "x.api.example.com", 0, 0, nullptr), 1);
    EXPECT_EQ(X509_check_ca(leaf->certificate()), 0) << "a leaf signs nothing";
    EXPECT_EQ(EVP_PKEY_get_base_id(leaf->key()), EVP_PKEY_EC);
    EXPECT_EQ(X509_check_private_key(leaf->certificate(), leaf->key()), 1);
    // The leaf is for TLS servers only.
    EXPECT_EQ(X509_check_purpose(leaf->certificate(), X509_PURPOSE_SSL_SERVER, 0), 1);
    EXPECT_NE(X509_check_purpose(leaf->certificate(), X509_PURPOSE_SSL_CLIENT, 0), 1);
}

TEST(SandboxCa, AddressesGetAnAddressLeaf) {
    auto ca = SandboxCa::create("sbx-test", std::chrono::hours(24));
    auto v4 = ca->leafFor("10.1.2.3");
    EXPECT_EQ(X509_check_ip_asc(v4->certificate(), "10.1.2.3", 0), 1);
    EXPECT_NE(X509_check_ip_asc(v4->certificate(), "10.1.2.4", 0), 1);
    EXPECT_TRUE(chainsTo(v4->certificate(), ca->certificate()));
    auto v6 = ca->leafFor("[2001:DB8::1]");
    EXPECT_EQ(v6->host(), "2001:db8::1");
    EXPECT_EQ(X509_check_ip_asc(v6->certificate(), "2001:db8::1", 0), 1);
}

TEST(SandboxCa, LeavesAreCachedPerHostAndEachHasItsOwnSerial) {
    auto ca = SandboxCa::create("sbx-test", std::chrono::hours(24));
    auto a = ca->leafFor("a.example.com");
    EXPECT_EQ(ca->leafFor("A.EXAMPLE.COM").get(), a.get()) << "minted once";
    auto b = ca->leafFor("b.example.com");
    EXPECT_NE(ASN1_INTEGER_cmp(X509_get0_serialNumber(a->certificate()),
                               X509_get0_serialNumber(b->certificate())),
              0);
    // Past the cap the oldest goes; a leaf still held stays valid.
    for (std::size_t i = 0; i < SandboxCa::kCachedLeaves; ++i)
        ca->leafFor("h" + std::to_string(i) + ".example.com");
    EXPECT_NE(ca->leafFor("a.example.com").get(), a.get()) << "re-minted after eviction";
    EXPECT_TRUE(chainsTo(a->certificate(), ca->certificate()));
}

TEST(SandboxCa, WhatIsNoHostGetsNoLeaf) {
    auto ca = SandboxCa::create("sbx-test", std::chrono::hours(24));
    for (const std::string& host : std::vector<std::string>{
             "", ".", "*.example.com", "a..b", "example.com/evil", "example.com:443",
             "ex ample.com", "-bad.example.com", "bad-.example.com", "user@example.com",
             "exämple.com", std::string(64, 'a') + ".com", std::string(254, 'a'),
             std::string("a\0b", 3), "example.com\r\nX: y"}) {
        try {
            ca->leafFor(host);
            ADD_FAILURE() << "minted for '" << host << "'";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::bad_request) << host;
        }
    }
    EXPECT_EQ(SandboxCa::canonicalHost("localhost"), "localhost");
}

TEST(SandboxCa, AReloadedCaMintsWhatTheGuestAlreadyTrusts) {
    auto ca = SandboxCa::create("sbx-test", std::chrono::hours(24));
    auto again = SandboxCa::fromPem(ca->certificatePem(), ca->keyPem());
    EXPECT_EQ(X509_cmp(again->certificate(), ca->certificate()), 0);
    EXPECT_TRUE(chainsTo(again->leafFor("api.example.com")->certificate(), ca->certificate()));
    // Another sandbox's CA vouches for none of this one's leaves.
    auto other = SandboxCa::create("sbx-other", std::chrono::hours(24));
    EXPECT_FALSE(chainsTo(ca->leafFor("api.example.com")->certificate(), other->certificate()));
    // A key that is not the certificate's, and what is no PEM, are refused.
    EXPECT_THROW(SandboxCa::fromPem(ca->certificatePem(), other->keyPem()), Error);
    EXPECT_THROW(SandboxCa::fromPem("not pem", ca->keyPem()), Error);
    EXPECT_THROW(SandboxCa::fromPem(ca->certificatePem(), ""), Error);
}

}  // namespace
}  // namespace airlock::egress

#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct evp_pkey_st;  // OpenSSL's EVP_PKEY

namespace airlock {

// The daemon's evidence signing key: ECDSA P-256, signatures over SHA-256 in
// DER, exactly what `openssl dgst -sha256 -sign` writes and `-verify` reads.
//
// A key directory holds active.pem (the private key, PKCS#8, 0600) and
// keys.json, every public key ever active with its keyid and dates. A
// rotation makes a new active key and keeps the old public half listed as
// inactive: bundles sealed before still verify, and a verifier can tell
// which key a bundle names. keyid = hex sha256 of the DER SubjectPublicKeyInfo.
class EvidenceKey {
  public:
    struct PublicKey {
        std::string keyid, alg, publicKeyPem, createdAt, retiredAt;
        bool active = false;
    };
    static constexpr const char* kAlg = "ecdsa-p256-sha256";

    // The active key of dir; dir (0700) and a first key are made when missing.
    static EvidenceKey loadOrCreate(const std::string& dir);
    // Retires the active key (its public half stays listed) and makes another.
    static EvidenceKey rotate(const std::string& dir);
    static std::vector<PublicKey> list(const std::string& dir);

    const std::string& keyid() const { return keyid_; }
    const std::string& publicKeyPem() const { return publicPem_; }
    std::string sign(std::string_view data) const;  // DER ECDSA signature of sha256(data)

    // True only for a valid signature of data by this public key (PEM).
    static bool verify(const std::string& publicKeyPem, std::string_view data,
                       std::string_view signature);
    // Throws Error(bad_request) when the text is not a P-256 public key.
    static std::string keyidOf(const std::string& publicKeyPem);

  private:
    explicit EvidenceKey(std::shared_ptr<evp_pkey_st> key);
    static EvidenceKey create(const std::string& dir, std::vector<PublicKey> previous);
    std::shared_ptr<evp_pkey_st> key_;
    std::string keyid_, publicPem_;
};

}  // namespace airlock

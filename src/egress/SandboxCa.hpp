#pragma once
#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

typedef struct x509_st X509;
typedef struct evp_pkey_st EVP_PKEY;

namespace airlock::egress {

// A certificate the proxy shows the guest for one host: the leaf (signed by
// the sandbox's CA) and its private key. Owns a reference to each.
class LeafCertificate {
  public:
    LeafCertificate(X509* cert, EVP_PKEY* key);  // takes a reference to each
    ~LeafCertificate();
    LeafCertificate(const LeafCertificate&) = delete;
    LeafCertificate& operator=(const LeafCertificate&) = delete;
    X509* certificate() const { return cert_; }
    EVP_PKEY* key() const { return key_; }
    std::string host() const;  // the name or address it is for

  private:
    X509* cert_;
    EVP_PKEY* key_;
};

// A sandbox's own certificate authority, for the hosts whose requests the
// egress proxy opens to add a secret: ECDSA P-256, made at create, named for
// the sandbox; its key never leaves the host (the guest gets the
// certificate only). One P-256 key serves every leaf of the sandbox (a leaf
// then costs one signature); leaves are minted for exact hosts on first use
// (no wildcards, even for a wildcard scope), cached, at most kCachedLeaves.
// Thread-safe.
class SandboxCa {
  public:
    static constexpr std::size_t kCachedLeaves = 256;

    // A new CA valid for `lifetime` from now (and two days before: a guest
    // restored from a snapshot may run with a stale clock for a while).
    static std::unique_ptr<SandboxCa> create(const std::string& sandboxId,
                                             std::chrono::seconds lifetime);
    // The CA certificatePem()/keyPem() wrote; Error(bad_request) for
    // anything else, or a key that is not the certificate's.
    static std::unique_ptr<SandboxCa> fromPem(const std::string& certificatePem,
                                              const std::string& keyPem);
    ~SandboxCa();
    SandboxCa(const SandboxCa&) = delete;
    SandboxCa& operator=(const SandboxCa&) = delete;

    std::string certificatePem() const;  // what the guest trusts
    std::string keyPem() const;          // to keep on the host (sealed by the caller)
    X509* certificate() const { return ca_; }

    // The leaf for a host (a DNS name, or an IPv4/IPv6 address), minted on
    // first use. Error(bad_request) for anything that is not one.
    std::shared_ptr<const LeafCertificate> leafFor(const std::string& host);

    // The host as a leaf names it: lowercase, no trailing dot; nullopt-like
    // "" for what no leaf is minted for (a wildcard, a path, a port, a label
    // over 63 characters, non-ASCII).
    static std::string canonicalHost(const std::string& host);

  private:
    SandboxCa(X509* ca, EVP_PKEY* caKey);
    std::shared_ptr<const LeafCertificate> mint(const std::string& host) const;

    X509* ca_;
    EVP_PKEY* caKey_;
    EVP_PKEY* leafKey_;
    std::mutex mutex_;
    std::map<std::string, std::shared_ptr<const LeafCertificate>> leaves_;
    std::deque<std::string> minted_;  // oldest first: the first to go past the cap
};

}  // namespace airlock::egress

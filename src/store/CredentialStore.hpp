#pragma once
#include <optional>
#include <string>
#include <vector>

#include "store/Database.hpp"

namespace airlock {

// A tenant's credential for a git host, its secret sealed (AES-GCM, bound
// to tenant and name) by the caller before it gets here.
struct CredentialRecord {
    std::string tenant;
    std::string name;
    std::string kind;  // https-token | https-basic | ssh-key
    std::string host;  // host, with ":port" when not the scheme's default
    std::string username;
    std::string secretSealed;
    std::string knownHosts;  // ssh-key only
    std::string createdAt;
    // Repository path prefixes ("/org/") the credential may also be sent
    // to; empty: only the workspace's own repository.
    std::vector<std::string> scope = {};
};

// Where tenants' credentials are kept: this host's database, or a fleet's
// etcd (fleet::FleetCredentials).
class Credentials {
  public:
    virtual ~Credentials() = default;
    // False when the tenant already has one of that name.
    virtual bool insert(const CredentialRecord& c) = 0;
    virtual std::optional<CredentialRecord> find(const std::string& tenant,
                                                 const std::string& name) = 0;
    virtual std::vector<CredentialRecord> list(const std::string& tenant) = 0;
    virtual bool remove(const std::string& tenant, const std::string& name) = 0;
};

// The record as JSON (what a fleet stores), and back (nullopt: not one).
std::string storedCredentialJson(const CredentialRecord& c);
std::optional<CredentialRecord> storedCredentialFromJson(const std::string& text);

class CredentialStore final : public Credentials {
  public:
    explicit CredentialStore(Database& db);
    bool insert(const CredentialRecord& c) override;
    std::optional<CredentialRecord> find(const std::string& tenant,
                                         const std::string& name) override;
    std::vector<CredentialRecord> list(const std::string& tenant) override;
    bool remove(const std::string& tenant, const std::string& name) override;

  private:
    Database& db_;
};

}  // namespace airlock

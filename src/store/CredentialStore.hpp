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

class CredentialStore {
  public:
    explicit CredentialStore(Database& db);
    // False when the tenant already has one of that name.
    bool insert(const CredentialRecord& c);
    std::optional<CredentialRecord> find(const std::string& tenant, const std::string& name);
    std::vector<CredentialRecord> list(const std::string& tenant);
    bool remove(const std::string& tenant, const std::string& name);

  private:
    Database& db_;
};

}  // namespace airlock

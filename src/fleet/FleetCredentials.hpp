#pragma once
#include "fleet/KeyValueStore.hpp"
#include "store/CredentialStore.hpp"

namespace airlock::fleet {

// A fleet's brokered credentials in etcd: /airlock/credentials/<tenant>/<name>
// holds the record, its secret sealed as on one host (with the fleet's
// credential key, derived from the cluster token, so any node opens what
// any node sealed). Created at most once per name (a transaction on its
// absence); read at each fetch or push, so a removal holds at once.
class FleetCredentials final : public Credentials {
  public:
    static constexpr const char* kPrefix = "/airlock/credentials/";
    explicit FleetCredentials(KeyValueStore& store) : store_(store) {}
    bool insert(const CredentialRecord& c) override;
    std::optional<CredentialRecord> find(const std::string& tenant,
                                         const std::string& name) override;
    std::vector<CredentialRecord> list(const std::string& tenant) override;
    bool remove(const std::string& tenant, const std::string& name) override;

  private:
    static std::string keyOf(const std::string& tenant, const std::string& name) {
        return std::string(kPrefix) + tenant + "/" + name;
    }
    KeyValueStore& store_;
};

}  // namespace airlock::fleet

#pragma once
#include "fleet/KeyValueStore.hpp"
#include "store/TenantSecretStore.hpp"

namespace airlock::fleet {

// A fleet's tenant secrets in etcd: /airlock/tenant-secrets/<tenant>/<name>
// holds the record, its value sealed with the fleet's credential key (any
// node opens what any node sealed).
class FleetTenantSecrets final : public TenantSecretRecords {
  public:
    static constexpr const char* kPrefix = "/airlock/tenant-secrets/";
    explicit FleetTenantSecrets(KeyValueStore& store) : store_(store) {}
    bool put(const TenantSecretRecord& s) override;
    std::optional<TenantSecretRecord> find(const std::string& tenant,
                                           const std::string& name) override;
    std::vector<TenantSecretRecord> list(const std::string& tenant) override;
    bool remove(const std::string& tenant, const std::string& name) override;

  private:
    static std::string keyOf(const std::string& tenant, const std::string& name) {
        return std::string(kPrefix) + tenant + "/" + name;
    }
    KeyValueStore& store_;
};

}  // namespace airlock::fleet

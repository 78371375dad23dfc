#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "controller/SandboxSecrets.hpp"
#include "core/SecretCipher.hpp"
#include "store/TenantSecretStore.hpp"

namespace airlock {

// Injected secrets a tenant's admin defines once for all the tenant's
// sandboxes (PUT /v1/secrets/{name}). Each sandbox gets its own placeholder
// for one at create, and the change of one reaches its running sandboxes
// (SandboxController::applyTenantSecret). The value is sealed at rest,
// bound to tenant and name, and never answered.
class TenantSecrets {
  public:
    static constexpr std::size_t kMaxPerTenant = 64;
    // Where a change is audited (the tenant's log; never the value).
    using Recorder = std::function<void(const std::string& tenant, const std::string& type,
                                        const nlohmann::json& data)>;
    // cipher: none means none can be stored (Error(unavailable)).
    TenantSecrets(TenantSecretRecords& store, std::shared_ptr<const SecretCipher> cipher,
                  Recorder record = nullptr)
        : store_(store), cipher_(std::move(cipher)), record_(std::move(record)) {}

    // Adds or replaces (`by`: the key that did, for the audit); true when it
    // was new. Error(bad_request) for a secret that is not injected,
    // Error(quota_exceeded) past kMaxPerTenant.
    bool set(const std::string& tenant, const std::string& name, const SecretSpec& spec,
             const std::string& by);
    // Records without their values.
    std::vector<TenantSecretRecord> list(const std::string& tenant);
    // Error(not_found) when the tenant has none of that name.
    TenantSecretRecord get(const std::string& tenant, const std::string& name);
    // False when the tenant has none of that name (any sandbox that still
    // holds it is then to be brought in line all the same).
    bool remove(const std::string& tenant, const std::string& name, const std::string& by);
    // What a sandbox of the tenant gets: each opened, marked as the
    // tenant's, without a placeholder yet (its sandbox makes one).
    SecretMap secretsOf(const std::string& tenant);
    std::optional<SecretSpec> secretOf(const std::string& tenant, const std::string& name);

  private:
    static std::string context(const std::string& tenant, const std::string& name);
    SecretSpec opened(const TenantSecretRecord& r) const;
    TenantSecretRecords& store_;
    std::shared_ptr<const SecretCipher> cipher_;
    Recorder record_;
};

}  // namespace airlock

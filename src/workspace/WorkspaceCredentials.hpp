#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/SecretCipher.hpp"
#include "egress/AddressPolicy.hpp"
#include "store/CredentialStore.hpp"
#include "workspace/GitRemoteAccess.hpp"
#include "workspace/RemoteUrl.hpp"

namespace airlock::workspace {

// POST /v1/credentials
struct CredentialSpec {
    std::string name, kind, host, username, secret, knownHosts;
    // Path prefixes it may go to beyond the workspace's own repository; none:
    // the repositories in the same directory as the workspace's own.
    std::vector<std::string> scope;
};

// A tenant's git credentials: the secret sealed at rest under the daemon's
// key, never returned by any call; opened only on the host, for a fetch or
// a push of a repository the credential's host, kind and scope cover.
class WorkspaceCredentials {
  public:
    static constexpr std::size_t kMaxPerTenant = 64;
    // Where a credential's creation is audited (the tenant's log).
    using Recorder = std::function<void(const std::string& tenant, const std::string& type,
                                        const nlohmann::json& data)>;

    // cipher: none means no credential can be stored or opened
    // (Error(unavailable)).
    WorkspaceCredentials(Credentials& store, std::shared_ptr<const SecretCipher> cipher,
                         egress::AddressPolicy addressPolicy, Recorder record);

    // The stored record without its sealed secret. Error(quota_exceeded) past
    // kMaxPerTenant, Error(conflict) for a name the tenant has.
    CredentialRecord add(const std::string& tenant, const CredentialSpec& spec);
    std::vector<CredentialRecord> list(const std::string& tenant);
    // Error(not_found) when the tenant has none of that name.
    void remove(const std::string& tenant, const std::string& name);
    // The named credential for `url` with its secret opened, scoped to the
    // paths it may reach (its own scope, else the directory of `url`);
    // nullopt for no name. Error(not_found), Error(forbidden) for another
    // host or a path outside its scope, Error(bad_request) for a kind that
    // does not fit the scheme.
    std::optional<BrokeredCredential> open(const std::string& tenant, const std::string& name,
                                           const RemoteUrl& url);
    // Every secret the tenant's credentials hold, opened: what its
    // sandboxes' outputs and records are masked of (none without a key).
    std::vector<std::string> secretsOf(const std::string& tenant);

  private:
    static std::string context(const std::string& tenant, const std::string& name);

    Credentials& store_;
    std::shared_ptr<const SecretCipher> cipher_;
    egress::AddressPolicy addressPolicy_;
    Recorder record_;
};

}  // namespace airlock::workspace

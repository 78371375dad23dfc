#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/SecretCipher.hpp"
#include "core/SecretMasker.hpp"
#include "egress/EgressProxy.hpp"
#include "store/GatedExecStore.hpp"
#include "store/SandboxStore.hpp"

namespace airlock {

// Where an injected secret goes: added by the egress proxy to requests for
// `hosts` (exact names or "*.suffix"), as `header` set to `format` with
// {value} replaced, or (no header) wherever the guest put `placeholder`,
// the random stand-in its environment holds instead of the value.
struct SecretInjection {
    std::vector<std::string> hosts;
    std::string header, format = "{value}";
    std::string placeholder;  // made when it is sealed
};

// A secret: an environment variable of the commands it is scoped to (all
// when `commands` is empty; else command-prefix globs). An injected one's
// variable holds its placeholder: the guest never has the value.
struct SecretSpec {
    SecretSpec(std::string v = {}, std::vector<std::string> c = {},
               std::optional<SecretInjection> i = std::nullopt)
        : value(std::move(v)), commands(std::move(c)), inject(std::move(i)) {}
    std::string value;
    std::vector<std::string> commands;
    std::optional<SecretInjection> inject;
    // The tenant's (TenantSecrets), not the create's: it follows the
    // tenant's changes, and gives way to a create's secret of its name.
    bool fromTenant = false;
};
using SecretMap = std::map<std::string, SecretSpec>;

// A sandbox's secrets: sealed at rest with the daemon's key and bound to the
// sandbox's id (a sealed value copied to another record does not open),
// opened only to be injected into a command or to mask what the sandbox
// shows. Values the guest is never given (a tenant's brokered git
// credentials: host-only) are masked in text the host writes only, never
// compared with guest output. Without a key a sandbox cannot have secrets.
class SandboxSecrets {
  public:
    explicit SandboxSecrets(std::shared_ptr<const SecretCipher> cipher)
        : cipher_(std::move(cipher)) {}

    // The sealed form of a create's secrets. Error(bad_request) without a key,
    // or for a value too short to be masked. Injected secrets get their
    // placeholders, and the sandbox its egress CA, here; `previous` (what
    // was sealed before, for a secret added later) keeps both.
    std::string seal(const SecretMap& secrets, const std::string& sandboxId,
                     const std::string& previous = "") const;
    // What was sealed for one id, sealed again for another (a clone that
    // takes a spare's id).
    std::string reseal(const std::string& sealed, const std::string& fromId,
                       const std::string& toId) const;
    // A move to another host: what this host sealed, sealed with the
    // journey's key (sealFor), and what came sealed with it sealed with this
    // host's (sealFrom); bound to the same id throughout.
    std::string sealFor(const SecretCipher& journey, const std::string& sealed,
                        const std::string& sandboxId) const;
    std::string sealFrom(const SecretCipher& journey, const std::string& sealed,
                         const std::string& sandboxId) const;
    // A sandbox's secrets, opened (none when it has none).
    SecretMap open(const SandboxRecord& r) const;
    // What the egress proxy adds for the sandbox: its injected secrets and
    // its CA (made when the first injected secret was sealed, sealed with
    // them); null when it has none.
    std::shared_ptr<const egress::SandboxInjections> injections(const SandboxRecord& r) const;
    // The CA certificate its guest trusts (PEM); "" when it has none.
    std::string egressCaCertificate(const SandboxRecord& r) const;
    // Where the guest keeps its egress CA (guestTrustScript writes them):
    // the CA alone, and the system's roots with it.
    static constexpr const char* kGuestCaFile = "/etc/airlock/egress-ca.pem";
    static constexpr const char* kGuestCaBundle = "/etc/airlock/ca-bundle.pem";
    static constexpr const char* kGuestNodePreload = "/etc/airlock/node-proxy.js";
    // The variables that make node, python, pip, curl and git trust the
    // sandbox's egress CA (none without injected secrets).
    static std::map<std::string, std::string> trustEnv(const SecretMap& secrets);
    // A root shell script that installs the CA PEM read from its stdin:
    // the files above, and the system store (idempotent).
    static std::string guestTrustScript();
    // The variables a command gets: the secrets scoped to its text.
    static std::map<std::string, std::string> envFor(const SecretMap& secrets,
                                                     const std::string& commandText);

    // For what the guest or the agent chose (command output, streamed or
    // not, process logs, listings, names, command texts): the values the
    // guest was given, its secrets, and nothing else. A host-only value
    // compared with guest output turns the streaming masker's hold-back into
    // a prefix oracle for it (issue 29, attack 1); the guest cannot print
    // what it never had.
    static SecretMasker guestOutputMasker(const SecretMap& secrets);
    SecretMasker guestOutputMasker(const SandboxRecord& r) const {
        return guestOutputMasker(open(r));
    }
    // For a stream of output (its masker holds back a tail that could begin
    // a value): only what the streamed command was given, the unscoped
    // secrets and those scoped to `commandText` ("" for a stream that runs
    // no command of its own choosing). A secret scoped to other commands,
    // perhaps gated behind an approval, is never compared with it: its
    // hold-back would spell the value out to a guest that never had it.
    static SecretMasker streamMasker(const SecretMap& secrets, const std::string& commandText);
    // For text the host writes itself (git and libgit2 errors, the records
    // of fetches and pushes): the secrets and the host-only values
    // (setExtraSource). Never for guest output, never streamed.
    SecretMasker hostTextMasker(const SandboxRecord& r) const;
    // The host-only values of a sandbox (its tenant's git credentials); a
    // source that throws is logged and the secrets are still masked.
    using ExtraSource = std::function<std::vector<std::string>(const SandboxRecord&)>;
    void setExtraSource(ExtraSource source);

    // A request parked for approval may name a secret's value (typed into
    // the command): sealed like the secrets when the sandbox has any, and
    // opened to run it. Error(internal) when it was sealed and no key is set.
    std::string sealRequest(const SandboxRecord& r, const std::string& requestJson) const;
    nlohmann::json openRequest(const GatedExec& g) const;

  private:
    // The sealed JSON opened (an empty object when there is none).
    nlohmann::json opened(const SandboxRecord& r) const;
    static SecretMap secretsIn(const nlohmann::json& sealed);
    std::shared_ptr<const SecretCipher> cipher_;
    mutable std::mutex mutex_;  // guards extra_
    ExtraSource extra_;
};

}  // namespace airlock

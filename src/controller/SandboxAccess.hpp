#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "agentclient/AgentConnection.hpp"
#include "controller/ExecOptions.hpp"
#include "core/Error.hpp"
#include "core/SecretMasker.hpp"
#include "protocol/Messages.hpp"
#include "store/SandboxStore.hpp"

namespace airlock {

// A command ready for the agent: its request (environment and scoped
// secrets in) and the masker of what it may print.
struct PreparedCommand {
    protocol::ExecRequest request;
    SecretMasker masker;
};

// Error(conflict) unless the sandbox is running: the one wording of it.
inline void requireRunningState(const SandboxRecord& r) {
    if (r.state != SandboxState::running)
        throw Error(ErrorCode::conflict,
                    "sandbox " + r.id + " is " + sandboxStateName(r.state) + ", not running");
}

// What the guest services (GuestFiles, GuestProcesses) need of the sandbox
// controller, and no more: the caller's sandbox, its agent session, the
// masker of its guest output, its write scope, the policy gate and the audit log. The
// controller implements it; unit tests put a fake behind it.
class SandboxAccess {
  public:
    virtual ~SandboxAccess() = default;
    // The caller's sandbox: Error(not_found) when missing or another tenant's.
    virtual SandboxRecord requireOwned(const std::string& tenant, const std::string& id) = 0;
    // The same, and running: Error(conflict) when it is not.
    virtual SandboxRecord requireRunning(const std::string& tenant, const std::string& id) = 0;
    // Any tenant's sandbox, for a caller that holds another credential (a
    // preview port's token); nullopt when there is none.
    virtual std::optional<SandboxRecord> find(const std::string& sandboxId) = 0;
    // The sandbox's one agent session (reconnected when it broke).
    virtual std::shared_ptr<AgentConnection> agentFor(const std::string& sandboxId) = 0;
    // What guest output is masked with: the secrets the guest was given,
    // never a host-only value (SandboxSecrets::guestOutputMasker). The guest
    // services have no other masker.
    virtual SecretMasker guestOutputMasker(const SandboxRecord& r) const = 0;
    // What a stream of guest output is masked with: the secrets the streamed
    // command was given (SandboxSecrets::streamMasker).
    virtual SecretMasker streamMasker(const SandboxRecord& r,
                                      const std::string& commandText) const = 0;
    // Error(forbidden) when `path` is outside the sandbox's write scope.
    virtual void checkWrite(const SandboxRecord& r, const std::string& path) = 0;
    // Error(insufficient_storage) when the data dir is below its free-space floor.
    virtual void requireFreeSpace(const std::string& what, std::uint64_t needBytes) const = 0;
    // A command judged by the command policy (anything but allow is refused
    // and audited; `door` names the route in the record), with exec's
    // defaults: user, the sandbox's environment, the secrets scoped to it.
    virtual PreparedCommand prepareCommand(const SandboxRecord& r, const ExecOptions& options,
                                           const char* door) = 0;
    // An audit record of a sandbox (strings masked with `masker` when given).
    virtual void record(const std::string& sandboxId, const std::string& tenant,
                        const std::string& type, const nlohmann::json& data,
                        const SecretMasker* masker) = 0;
};

}  // namespace airlock

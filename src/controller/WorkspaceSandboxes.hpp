#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "agentclient/AgentConnection.hpp"
#include "controller/ApprovalGates.hpp"
#include "controller/CreateSandboxRequest.hpp"
#include "controller/SandboxSecrets.hpp"
#include "store/GatedExecStore.hpp"
#include "store/SandboxStore.hpp"

namespace airlock {

// What the workspace service needs of the sandbox controller, and no more:
// sandboxes made and removed with their workspace, their agent session,
// the audit log, the push gates, and two hooks back into the service (the
// write scope of the files API, the host-only values to mask). The
// controller implements it (SandboxController::workspaceSandboxes()).
class WorkspaceSandboxes {
  public:
    // A write through the files API, checked against the sandbox's write
    // scope (throws Error(forbidden)); a decided publish approval (a push),
    // handed back on a thread of its own.
    using WriteGuard = std::function<void(const SandboxRecord&, const std::string& path)>;
    using PublishHandler = std::function<void(const GatedExec&, bool approved)>;
    using ExtraSecrets = SandboxSecrets::ExtraSource;
    // A workspace moving with its sandbox between nodes: the host's commits
    // packed (false: none), and the workspace made whole on the new node.
    using PackWorkspace = std::function<bool(const SandboxRecord&, const std::string& packPath)>;
    using ArriveWorkspace = std::function<void(const SandboxRecord&, const std::string& recordJson,
                                               const std::string& packPath)>;

    virtual ~WorkspaceSandboxes() = default;
    virtual SandboxRecord create(const std::string& tenant, const CreateSandboxRequest& request) = 0;
    // `why` ends the message of calls still open on the sandbox.
    virtual void destroy(const std::string& tenant, const std::string& id,
                         const std::string& why) = 0;
    // The caller's sandbox: Error(not_found) when missing or another tenant's.
    virtual SandboxRecord get(const std::string& tenant, const std::string& id) = 0;
    // Owned and running (Error(conflict) when not): its one agent session.
    virtual std::shared_ptr<AgentConnection> runningAgent(const std::string& tenant,
                                                          const std::string& id) = 0;
    // A record the host writes about a sandbox, masked as host text (its
    // host-only values too).
    virtual void recordEvent(const SandboxRecord& r, const std::string& type,
                             const nlohmann::json& data) = 0;
    // Error(insufficient_storage) below the data dir's free-space floor.
    virtual void requireFreeSpace(const std::string& what, std::uint64_t needBytes) const = 0;
    // Starts recording the guest's own reads and writes under `path`.
    virtual bool watchFiles(const std::string& tenant, const std::string& id,
                            const std::string& path) = 0;
    // Pushes wait for a human here.
    virtual ApprovalGates& gates() = 0;
    virtual void setWorkspaceHooks(WriteGuard guard, PublishHandler publish) = 0;
    virtual void setExtraSecrets(ExtraSecrets source) = 0;
    virtual void setWorkspaceTravel(PackWorkspace pack, ArriveWorkspace arrive) = 0;
};

}  // namespace airlock

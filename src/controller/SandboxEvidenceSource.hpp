#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agentclient/AgentConnection.hpp"
#include "controller/SandboxAuditLog.hpp"
#include "core/SecretMasker.hpp"
#include "protocol/GuestCalls.hpp"
#include "protocol/GuestResults.hpp"
#include "store/AuditStore.hpp"
#include "store/PortStore.hpp"
#include "store/SandboxStore.hpp"

namespace airlock {

// What the evidence service reads of a sandbox and records about it, and
// no more: the record, its audit log, its guest (artifacts, file activity),
// its ports and the masker of guest output. The controller's view
// implements it (SandboxController::evidenceSource()); a fake may stand
// behind it in unit tests.
class SandboxEvidenceSource : public SandboxAuditLog {
  public:
    // The caller's sandbox: Error(not_found) when missing or another tenant's.
    virtual SandboxRecord get(const std::string& tenant, const std::string& id) = 0;
    // The sandbox's agent session, when it runs (Error(conflict) when not).
    virtual std::shared_ptr<AgentConnection> runningAgent(const std::string& tenant,
                                                          const std::string& id) = 0;
    // One file operation in the guest, its answer masked.
    virtual protocol::FsResult fileOp(const std::string& tenant, const std::string& id,
                                      const protocol::FsRequest& request) = 0;
    // Moves what the guest gathered about file activity into the audit log.
    virtual void drainFileActivity(const SandboxRecord& r) = 0;
    virtual std::vector<ExposedPort> exposedPorts(const std::string& tenant, const std::string& id) = 0;
    // Guest output is masked with this: the secrets the guest was given.
    virtual SecretMasker guestOutputMasker(const SandboxRecord& r) const = 0;
    // A record the host writes about the sandbox (masked as host text).
    virtual void recordEvent(const SandboxRecord& r, const std::string& type,
                             const nlohmann::json& data) = 0;
};

}  // namespace airlock

#pragma once
#include <functional>
#include <mutex>
#include <string>

#include "controller/ApprovalDecisions.hpp"
#include "controller/ApprovalGates.hpp"
#include "controller/SandboxCommands.hpp"

namespace airlock {

// What a decided approval lets through, by what was parked: a REST exec
// runs (SandboxCommands), a streamed exec's waiting client is told, a push
// goes to the workspace service's publish handler, a package version is let
// through by the package proxy from then on (nothing runs). The gates keep
// the state machine; this routes the outcome.
class ApprovalRouter : public ApprovalDecisions {
  public:
    // A decided push, handed to the workspace service (which only queues it).
    using PublishHandler = std::function<void(const GatedExec&, bool approved)>;

    ApprovalRouter(ApprovalGates& gates, SandboxCommands& commands)
        : gates_(gates), commands_(commands) {}

    GatedExec decideApproval(const std::string& tenant, const std::string& approvalId,
                             bool approve, const std::string& reason,
                             const std::string& decidedBy,
                             const std::string& expectDigest = "") override;
    // None: an approved push fails ("workspaces are not configured").
    void setPublishHandler(PublishHandler handler);

  private:
    ApprovalGates& gates_;
    SandboxCommands& commands_;
    std::mutex mutex_;
    PublishHandler publish_;
};

}  // namespace airlock

#pragma once
#include <string>

#include "store/GatedExecStore.hpp"

namespace airlock {

// A tenant's decision on one of its approvals, and what it lets through: an
// approved REST exec runs, a streamed one's client is told, a push goes to
// the workspace service, a package version passes the package proxy from
// then on. (ApprovalGates::decide alone records it and runs nothing.)
class ApprovalDecisions {
  public:
    virtual ~ApprovalDecisions() = default;
    // `expectDigest`: the request digest the approver read (optional).
    virtual GatedExec decideApproval(const std::string& tenant, const std::string& approvalId,
                                     bool approve, const std::string& reason,
                                     const std::string& decidedBy,
                                     const std::string& expectDigest = "") = 0;
};

}  // namespace airlock

// The workspace hooks and the audit log's query (a decided approval is
// ApprovalRouter's).
#include <nlohmann/json.hpp>

#include "controller/SandboxController.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"

namespace airlock {

std::vector<AuditEvent> SandboxController::audit(const std::string& tenant,
                                                 const std::string& sandboxId,
                                                 const AuditQuery& query) {
    // Readable after the sandbox is gone: ownership comes from the events.
    auto live = isValidId(sandboxId, "sbx-") ? store_.find(sandboxId) : std::nullopt;
    std::string owner =
        live ? live->tenant : (isValidId(sandboxId, "sbx-") ? audit_.tenantOf(sandboxId) : "");
    if (owner.empty() || owner != tenant)
        throw Error(ErrorCode::not_found, "no sandbox " + sandboxId);
    return audit_.query(sandboxId, query);
}

void SandboxController::setWorkspaceHooks(WriteGuard guard, PublishHandler publish) {
    hooks_.setWriteGuard(std::move(guard));
    approvals_.setPublishHandler(std::move(publish));
}

}  // namespace airlock

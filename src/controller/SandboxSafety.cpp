// What a decided approval lets through (ApprovalGates keeps the state; an
// approved command runs in SandboxCommands), the workspace hooks, and the
// audit log's query.
#include <nlohmann/json.hpp>

#include "controller/SandboxController.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"

namespace airlock {

GatedExec SandboxController::decideApproval(const std::string& tenant,
                                            const std::string& approvalId, bool approve,
                                            const std::string& reason,
                                            const std::string& decidedBy,
                                            const std::string& expectDigest) {
    auto [decided, parked] =
        gates_.decide(tenant, approvalId, approve, reason, decidedBy, expectDigest);
    if (parked.is_object() && parked.value("kind", "") == "package") {
        // Nothing runs: the package proxy lets the version through from now on.
        if (approve) gates_.finish(decided.id, "approved", 0, "", "", "");
        return *gates_.find(decided.id);
    }
    if (parked.is_object() && parked.value("kind", "") == "publish") {
        PublishHandler handler;
        {
            std::lock_guard lock(hooksMutex_);
            handler = publishHandler_;
        }
        if (!handler) {
            if (approve)
                gates_.finish(decided.id, "failed", -1, "", "", "workspaces are not configured");
        } else {
            // The handler only queues the push (its worker talks to the
            // remote): nothing slow on the approver's request thread.
            try {
                handler(decided, approve);
            } catch (const std::exception& e) {
                logError("controller", std::string("publish decision: ") + e.what());
            }
        }
        return decided;
    }
    bool streamed = parked.is_object() && parked.value("stream", false) == true;
    if (streamed) {
        // Its client runs it (or is told no); gone already: nothing runs.
        if (!gates_.waiters().notify(decided) && approve)
            gates_.finish(decided.id, "failed", -1, "", "", "the streaming client had left");
        return *gates_.find(decided.id);
    }
    if (approve) commands_.runApproved(decided);
    return decided;
}

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
    std::lock_guard lock(hooksMutex_);
    writeGuard_ = std::move(guard);
    publishHandler_ = std::move(publish);
}

void SandboxController::checkWrite(const SandboxRecord& r, const std::string& path) {
    WriteGuard guard;
    {
        std::lock_guard lock(hooksMutex_);
        guard = writeGuard_;
    }
    if (guard) guard(r, path);
}

}  // namespace airlock

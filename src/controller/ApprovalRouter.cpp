#include "controller/ApprovalRouter.hpp"

#include <nlohmann/json.hpp>

#include "core/Log.hpp"

namespace airlock {

void ApprovalRouter::setPublishHandler(PublishHandler handler) {
    std::lock_guard lock(mutex_);
    publish_ = std::move(handler);
}

namespace {
// The record as it stands now (the decided one if it went meanwhile).
GatedExec latest(ApprovalGates& gates, const GatedExec& decided) {
    auto now = gates.find(decided.id);
    return now ? *now : decided;
}
}  // namespace

GatedExec ApprovalRouter::decideApproval(const std::string& tenant, const std::string& approvalId,
                                         bool approve, const std::string& reason,
                                         const std::string& decidedBy,
                                         const std::string& expectDigest) {
    auto [decided, parked] =
        gates_.decide(tenant, approvalId, approve, reason, decidedBy, expectDigest);
    std::string kind = parked.is_object() && parked.contains("kind") && parked["kind"].is_string()
                           ? parked["kind"].get<std::string>()
                           : "";
    if (kind == "package") {
        // Nothing runs: the package proxy lets the version through from now on.
        if (approve) gates_.finish(decided.id, "approved", 0, "", "", "");
        return latest(gates_, decided);
    }
    if (kind == "publish") {
        PublishHandler handler;
        {
            std::lock_guard lock(mutex_);
            handler = publish_;
        }
        if (!handler) {
            if (approve)
                gates_.finish(decided.id, "failed", -1, "", "", "workspaces are not configured");
            return latest(gates_, decided);
        }
        // The handler only queues the push (its worker talks to the remote):
        // nothing slow on the approver's request thread.
        try {
            handler(decided, approve);
        } catch (const std::exception& e) {
            logError("controller", std::string("publish decision: ") + e.what());
        }
        return decided;
    }
    bool streamed = parked.is_object() && parked.value("stream", false) == true;
    if (streamed) {
        // Its client runs it (or is told no); gone already: nothing runs.
        if (!gates_.waiters().notify(decided) && approve)
            gates_.finish(decided.id, "failed", -1, "", "", "the streaming client had left");
        return latest(gates_, decided);
    }
    if (approve) commands_.runApproved(decided);
    return decided;
}

}  // namespace airlock

#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "controller/AuditRecorder.hpp"
#include "controller/DecisionWaiters.hpp"
#include "controller/ExecOptions.hpp"
#include "controller/SandboxSecrets.hpp"
#include "core/SecretMasker.hpp"
#include "core/TimerQueue.hpp"
#include "packages/PackageService.hpp"
#include "policy/CommandPolicy.hpp"
#include "store/GatedExecStore.hpp"
#include "store/SandboxStore.hpp"

namespace airlock {

// What waits for a human: commands the policy sends for approval (REST and
// streamed execs), pushes (publish) and package versions. Each is a gated
// exec record: pending_approval, then decided (running, denied), expired
// (after the approval timeout) or cancelled (its sandbox went, its client
// left), then finished. Every transition is written to the store before
// anyone is told, and audited. What runs once approved is the controller's
// (decideApproval); the gates only keep the state machine, the streamed
// execs' waiting clients, and the parked requests (sealed when the sandbox
// has secrets).
class ApprovalGates {
  public:
    ApprovalGates(GatedExecStore& gated, AuditRecorder& audit, const SandboxSecrets& secrets,
                  TimerQueue& timers, std::int64_t approvalTimeoutS)
        : gated_(gated),
          audit_(audit),
          secrets_(secrets),
          timers_(timers),
          approvalTimeoutS_(approvalTimeoutS) {}

    // Parks a command (exec.pending_approval audited with `data`, the
    // verdict and the ids). A streamed one runs only while its client waits.
    // The record keeps the request's digest and what the approver is shown
    // of it: the whole command, cwd, user, env (secrets masked), stdin's
    // size and SHA-256, timeout, the injected secrets' names, the verdict.
    GatedExec parkExec(const SandboxRecord& r, const ExecOptions& options, const policy::Verdict& v,
                       nlohmann::json data, const SecretMasker& masker, bool streamed);
    // Parks a push: `id` names it, `request` is what the publish handler gets
    // back and what the approver is shown (commit, tree, base, diffstat,
    // evidence); its digest binds the approval to it.
    GatedExec parkPublish(const SandboxRecord& r, const std::string& id, const std::string& command,
                          const std::string& reason, const nlohmann::json& request);
    // A decided push: running -> state (pushed, rejected, failed) with why.
    void finishPublish(const std::string& id, const std::string& state, const std::string& error) {
        gated_.finish(id, state, state == "pushed" ? 0 : -1, "", "", error);
    }
    // The package proxy's approvals: the standing one for a package version
    // in a sandbox, or a new request an approver sees. At most 20 wait per
    // sandbox (a guest inventing names cannot flood the approvers' list).
    packages::PackageApprovalState packageApproval(const packages::PackageApprovalRequest& q);

    // A tenant's decision: Error(not_found) for another tenant's or an
    // unknown id, Error(conflict) when decided already. The decided record
    // and its parked request (what to run, or its kind).
    struct Decision {
        GatedExec exec;
        nlohmann::json request;
    };
    // `expectDigest` (optional, the approver's): when given and not the
    // request's digest, Error(conflict) and nothing is decided.
    Decision decide(const std::string& tenant, const std::string& approvalId, bool approve,
                    const std::string& reason, const std::string& decidedBy,
                    const std::string& expectDigest = "");
    // One approval of that tenant (any state); Error(not_found) otherwise.
    GatedExec approval(const std::string& tenant, const std::string& approvalId);
    // A sandbox's pending push approvals end `superseded` (a new commit or a
    // reset changed what would be pushed), each audited; returns them.
    std::vector<GatedExec> supersedePublishes(const std::string& sandboxId,
                                              const std::string& why);

    // The digest an approval binds: SHA-256 over the canonical JSON of the
    // parked request and its sandbox's id (keys sorted, no spaces).
    static std::string requestDigest(const std::string& sandboxId, const nlohmann::json& request);
    // The canonical parked form of an exec request.
    static nlohmann::json execRequestJson(const ExecOptions& options, bool streamed);
    // The parked request, opened and checked against the digest the record
    // was parked with: Error(conflict) when it differs or there is none.
    nlohmann::json verifiedRequest(const GatedExec& g) const;
    std::vector<GatedExec> pending(const TenantScope& scope);
    // Error(not_found) unless it is an exec of that tenant's sandbox.
    GatedExec get(const std::string& tenant, const std::string& sandboxId,
                  const std::string& execId);
    std::optional<GatedExec> find(const std::string& id) { return gated_.find(id); }
    std::vector<GatedExec> running(const std::string& idPrefix) { return gated_.running(idPrefix); }
    void finish(const std::string& id, const std::string& state, std::int64_t exitCode,
                const std::string& stdoutData, const std::string& stderrData,
                const std::string& error) {
        gated_.finish(id, state, exitCode, stdoutData, stderrData, error);
    }
    // Pending ones past their time become expired (their waiters told).
    void expire();
    // Its pending approvals end with the sandbox (nobody may run them later).
    void cancelOf(const std::string& sandboxId, const std::string& why);
    // Calls `done` (on the timer thread) once `id` is no longer running, or
    // at `within` with its state then.
    void await(const std::string& id, std::chrono::milliseconds within,
               std::function<void(GatedExec)> done);

    // Streamed execs: the clients waiting for decisions, the approved ones
    // started (each once), and one whose client left.
    DecisionWaiters& waiters() { return waiters_; }
    // The options are exactly the ones the streamed exec was parked with
    // (their digest is the approval's, and the parked request still is).
    bool sameStreamedRequest(const GatedExec& g, const ExecOptions& options) const;
    void abandonStreamed(const std::string& execId);
    void finishStreamed(const std::string& execId, int exitCode, const std::string& error);
    // The options a parked exec runs with: Error(internal) when unreadable,
    // Error(conflict) when the request is not the one the approval bound.
    ExecOptions parkedOptions(const GatedExec& g) const;

    // A fleet's record of where each approval lives, written when one opens
    // (a failure is logged: the other nodes then ask around for it).
    using Opened = std::function<void(const GatedExec&)>;
    void setOpenedHook(Opened hook) {
        std::lock_guard lock(hookMutex_);
        opened_ = std::move(hook);
    }

  private:
    void announce(const GatedExec& g);
    std::mutex hookMutex_;
    Opened opened_;
    GatedExecStore& gated_;
    AuditRecorder& audit_;
    const SandboxSecrets& secrets_;
    TimerQueue& timers_;
    std::int64_t approvalTimeoutS_;
    DecisionWaiters waiters_;
    std::mutex packageMutex_;  // one look-and-open of a package approval at a time
    static constexpr std::size_t kMaxPendingPackageApprovals = 20;  // per sandbox
};

}  // namespace airlock

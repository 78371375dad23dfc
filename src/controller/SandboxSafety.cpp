// The policy gate of the exec paths (CommandJudge decides, this audits and
// refuses), the REST exec, what a decided approval lets through
// (ApprovalGates keeps the state), and the audit log's query: shaped like
// Kata's rpc.rs handlers, trace -> policy check -> do it.
#include <nlohmann/json.hpp>

#include "controller/SandboxController.hpp"
#include "core/AwaitedResult.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"

namespace airlock {
namespace {

constexpr std::size_t kAuditOutputBytes = 4096;

std::string clip(const std::string& s) {
    return s.size() > kAuditOutputBytes ? s.substr(0, kAuditOutputBytes) : s;
}

}  // namespace

void SandboxController::requireAllowed(const SandboxRecord& r, const ExecOptions& options,
                                       const char* path) {
    auto v = judge_.judge(r, options);
    auto data = CommandJudge::auditData(r, options, path);
    data["policy"] = CommandJudge::verdictJson(v);
    auto masker = maskerFor(r);
    if (v.decision == policy::Decision::allow) {
        record(r.id, r.tenant, "exec.allowed", data, &masker);
        return;
    }
    record(r.id, r.tenant, "exec.denied", data, &masker);
    if (v.decision == policy::Decision::deny) throw CommandJudge::denied(v, masker);
    // Approval gates exist where a client can wait for the decision (the
    // REST exec answers 202, the WebSocket exec keeps the socket); a
    // background process start answers at once.
    throw Error(ErrorCode::policy_denied,
                masker.mask("needs approval (" + v.reason + "): run it with POST /v1/sandboxes/" +
                            r.id + "/exec or the WebSocket exec, which wait for a decision"));
}

ExecSubmission SandboxController::submitExec(const std::string& tenant, const std::string& id,
                                             const ExecOptions& options) {
    AwaitedResult<ExecOutput> result;
    if (auto pending = submitExecAsync(tenant, id, options, result.callback()))
        return ExecSubmission{std::nullopt, std::move(pending)};
    return ExecSubmission{result.get(), std::nullopt};  // the timer queue bounds it
}

std::optional<GatedExec> SandboxController::submitExecAsync(const std::string& tenant,
                                                            const std::string& id,
                                                            const ExecOptions& requested,
                                                            ExecCompletion done) {
    ExecOptions options = requested;
    options.trace = newId("ex-");
    auto r = requireOwned(tenant, id);
    if (r.state != SandboxState::running)
        throw Error(ErrorCode::conflict,
                    "sandbox " + id + " is " + sandboxStateName(r.state) + ", not running");
    auto v = judge_.judge(r, options);
    auto data = CommandJudge::auditData(r, options, nullptr);
    data["policy"] = CommandJudge::verdictJson(v);
    auto masker = std::make_shared<SecretMasker>(maskerFor(r));
    if (v.decision == policy::Decision::deny) {
        record(id, tenant, "exec.denied", data, masker.get());
        throw CommandJudge::denied(v, *masker);
    }
    if (v.decision == policy::Decision::approve)
        return gates_.parkExec(r, options, v, data, *masker, false);
    data["started_at"] = nowTimestamp();
    auto slot =
        tenantLimits_.acquireExecSlot(tenant);  // the tenant's concurrent_execs, held until it ends
    runExecAsync(r, options,
                 [this, id, tenant, data, masker, slot, done = std::move(done)](
                     std::optional<ExecOutput> out, std::exception_ptr error) mutable {
                     if (out) {
                         execLatency_.observe(static_cast<double>(out->durationMs) / 1000.0);
                         data["exit_code"] = out->result.exit_code;
                         data["duration_ms"] = out->durationMs;
                         data["stdout"] = clip(out->stdoutData);
                         data["stderr"] = clip(out->stderrData);
                         data["truncated"] = out->truncated;
                         data["timed_out"] = out->result.timed_out;
                         record(id, tenant, "exec.executed", data, masker.get());
                     } else {
                         std::string why = "unknown error";
                         try {
                             std::rethrow_exception(error);
                         } catch (const std::exception& e) {
                             why = e.what();
                         } catch (...) {
                         }
                         data["error"] = why;
                         record(id, tenant, "exec.failed", data, masker.get());
                     }
                     done(std::move(out), error);
                 });
    return std::nullopt;
}

GatedExec SandboxController::decideApproval(const std::string& tenant,
                                            const std::string& approvalId, bool approve,
                                            const std::string& reason,
                                            const std::string& decidedBy) {
    auto [decided, parked] = gates_.decide(tenant, approvalId, approve, reason, decidedBy);
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
    if (approve) runApproved(decided);
    return decided;
}

void SandboxController::runApproved(GatedExec g) {
    // Started here, finished on the agent's thread: nothing waits for it.
    auto fail = [this, g](const std::string& why) {
        gates_.finish(g.id, "failed", -1, "", "", why);
        record(g.sandboxId, g.tenant, "exec.failed",
               {{"command", g.command}, {"exec_id", g.id}, {"error", why}});
    };
    try {
        auto r = store_.find(g.sandboxId);
        if (!r) throw Error(ErrorCode::not_found, "the sandbox is gone");
        auto options = gates_.parkedOptions(g);
        options.trace = g.id;
        auto started = nowTimestamp();
        auto masker = std::make_shared<SecretMasker>(maskerFor(*r));
        bool test = CommandJudge::isTestRun(*r, options);
        runExecAsync(*r, options,
                     [this, g, options, started, masker, fail, test](std::optional<ExecOutput> out,
                                                                     std::exception_ptr error) {
                         if (!out) {
                             try {
                                 std::rethrow_exception(error);
                             } catch (const std::exception& e) {
                                 return fail(masker->mask(e.what()));
                             } catch (...) {
                                 return fail("unknown error");
                             }
                         }
                         gates_.finish(g.id, "exited", out->result.exit_code, out->stdoutData,
                                       out->stderrData, out->result.error);
                         nlohmann::json data{{"command", g.command},
                                             {"exec_id", g.id},
                                             {"approval_id", g.approvalId},
                                             {"cwd", options.cwd},
                                             {"user", options.user.empty() ? "user" : options.user},
                                             {"started_at", started},
                                             {"exit_code", out->result.exit_code},
                                             {"duration_ms", out->durationMs},
                                             {"stdout", clip(out->stdoutData)},
                                             {"stderr", clip(out->stderrData)},
                                             {"truncated", out->truncated},
                                             {"timed_out", out->result.timed_out}};
                         if (test) data["purpose"] = "test";
                         record(g.sandboxId, g.tenant, "exec.executed", data, masker.get());
                     });
    } catch (const std::exception& e) {
        fail(e.what());
    }
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

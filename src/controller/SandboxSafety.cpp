// The command policy on every exec path, approval gates for the REST exec,
// and the audit log: shaped like Kata's rpc.rs handlers, trace -> policy
// check -> do it.
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

policy::PolicyRules rulesFrom(const std::string& json) {
    policy::PolicyRules rules;
    auto j = nlohmann::json::parse(json, nullptr, false);
    if (!j.is_object()) return rules;
    auto list = [&](const char* key, std::vector<std::string>& out) {
        if (auto it = j.find(key); it != j.end() && it->is_array())
            for (const auto& g : *it)
                if (g.is_string()) out.push_back(g.get<std::string>());
    };
    list("deny", rules.deny);
    list("approve", rules.approve);
    list("allow", rules.allow);
    return rules;
}

nlohmann::json optionsJson(const ExecOptions& o) {
    nlohmann::json j{{"cwd", o.cwd},
                     {"env", o.env},
                     {"user", o.user},
                     {"timeout_s", o.timeoutS},
                     {"stdin", o.stdinData}};
    if (!o.purpose.empty()) j["purpose"] = o.purpose;
    if (o.shell)
        j["shell"] = *o.shell;
    else
        j["cmd"] = o.argv;
    return j;
}

// A parked request, written by optionsJson (a store that does not parse
// throws, and the run fails with that error).
ExecOptions optionsFrom(const nlohmann::json& j) {
    if (!j.is_object()) throw Error(ErrorCode::internal, "the parked request is not readable");
    ExecOptions o;
    if (j.contains("shell"))
        o.shell = j.at("shell").get<std::string>();
    else
        o.argv = j.at("cmd").get<std::vector<std::string>>();
    o.cwd = j.value("cwd", "");
    o.env = j.value("env", std::map<std::string, std::string>{});
    o.user = j.value("user", "");
    o.timeoutS = j.value("timeout_s", 60u);
    o.stdinData = j.value("stdin", "");
    o.purpose = j.value("purpose", "");
    return o;
}

std::string clip(const std::string& s) {
    return s.size() > kAuditOutputBytes ? s.substr(0, kAuditOutputBytes) : s;
}

nlohmann::json verdictJson(const policy::Verdict& v) {
    nlohmann::json j{{"decision", policy::decisionName(v.decision)},
                     {"class", policy::className(v.commandClass)},
                     {"reason", v.reason},
                     {"part", v.part}};
    if (!v.inlineCode.empty()) j["inline_code"] = v.inlineCode;
    return j;
}

}  // namespace

policy::PolicyRules SandboxController::rulesWithTenant(const SandboxRecord& r) const {
    auto rules = rulesFrom(r.policyJson);
    if (auto t = tenantOf(r.tenant)) {
        // deny > approve > allow: the tenant's deny and approve rules win
        // over the sandbox's own allow.
        rules.deny.insert(rules.deny.end(), t->deny.begin(), t->deny.end());
        rules.approve.insert(rules.approve.end(), t->approve.begin(), t->approve.end());
        rules.allow.insert(rules.allow.end(), t->allow.begin(), t->allow.end());
    }
    return rules;
}

bool SandboxController::isTestRun(const SandboxRecord& r, const ExecOptions& options) const {
    if (options.purpose == "test") return true;
    if (r.taskJson.empty()) return false;
    auto task = nlohmann::json::parse(r.taskJson, nullptr, false);
    if (!task.is_object() || !task.contains("test_commands") || !task["test_commands"].is_array())
        return false;
    std::vector<std::string> tests;
    for (const auto& t : task["test_commands"])
        if (t.is_string()) tests.push_back(t.get<std::string>());
    return matchesTestCommand(commandText(options), tests);
}

policy::Verdict SandboxController::judge(const SandboxRecord& r, const ExecOptions& options) const {
    auto rules = rulesWithTenant(r);
    return options.shell ? policy_.judgeShell(*options.shell, rules)
                         : policy_.judgeArgv(options.argv, rules);
}

void SandboxController::requireAllowed(const SandboxRecord& r, const ExecOptions& options,
                                       const char* path) {
    auto v = judge(r, options);
    nlohmann::json data{{"command", commandText(options)},
                        {"path", path},
                        {"cwd", options.cwd},
                        {"user", options.user.empty() ? "user" : options.user},
                        {"policy", verdictJson(v)}};
    if (isTestRun(r, options)) data["purpose"] = "test";
    if (!options.trace.empty()) data["exec_id"] = options.trace;
    auto masker = maskerFor(r);
    if (v.decision == policy::Decision::allow) {
        record(r.id, r.tenant, "exec.allowed", data, &masker);
        return;
    }
    record(r.id, r.tenant, "exec.denied", data, &masker);
    if (v.decision == policy::Decision::deny) throw policyDenied(v, masker);
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
    auto v = judge(r, options);
    std::string command = commandText(options);
    nlohmann::json data{{"command", command},
                        {"cwd", options.cwd},
                        {"user", options.user.empty() ? "user" : options.user},
                        {"policy", verdictJson(v)},
                        {"exec_id", options.trace}};
    if (isTestRun(r, options)) data["purpose"] = "test";
    auto masker = std::make_shared<SecretMasker>(maskerFor(r));
    if (v.decision == policy::Decision::deny) {
        record(id, tenant, "exec.denied", data, masker.get());
        throw policyDenied(v, *masker);
    }
    if (v.decision == policy::Decision::approve)
        return parkForApproval(r, options, v, data, *masker, false);
    data["started_at"] = nowTimestamp();
    auto slot = acquireExecSlot(tenant);  // the tenant's concurrent_execs, held until it ends
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

GatedExec SandboxController::parkForApproval(const SandboxRecord& r, const ExecOptions& options,
                                             const policy::Verdict& v, nlohmann::json data,
                                             const SecretMasker& masker, bool streamed) {
    GatedExec g;
    g.id = data.contains("exec_id") ? data["exec_id"].get<std::string>() : newId("ex-");
    g.approvalId = newId("apr-");
    g.sandboxId = r.id;
    g.tenant = r.tenant;
    auto request = optionsJson(options);
    // A streamed one runs only while its client waits (openApprovedExec).
    if (streamed) request["stream"] = true;
    g.requestJson = secrets_.sealRequest(r, request.dump());
    g.command = masker.mask(commandText(options));  // what approvers, the API and the audit show
    g.commandClass = policy::className(v.commandClass);
    g.reason = v.reason;
    g.requestedAt = nowTimestamp();
    g.expiresAt = nowUnixSeconds() + config_.approvalTimeoutS;
    gated_.insert(g);
    data["policy"] = verdictJson(v);
    data["exec_id"] = g.id;
    data["approval_id"] = g.approvalId;
    record(r.id, r.tenant, "exec.pending_approval", data, &masker);
    return g;
}

bool SandboxController::sameStreamedRequest(const GatedExec& g, const ExecOptions& options) const {
    auto want = optionsJson(options);
    want["stream"] = true;
    return secrets_.openRequest(g) == want;
}

Error SandboxController::policyDenied(const policy::Verdict& v, const SecretMasker& masker) {
    return Error(ErrorCode::policy_denied, masker.mask("denied by the command policy: " + v.reason +
                                                       " (in \"" + v.part + "\")"));
}

void SandboxController::abandonStreamedExec(const std::string& execId) {
    decisionWaiters_.remove(execId);
    auto g = gated_.find(execId);
    if (!g) return;
    if (gated_.decide(execId, "cancelled", nowTimestamp(), "airlockd",
                      "the client left before a decision")) {
        record(g->sandboxId, g->tenant, "approval.cancelled",
               {{"approval_id", g->approvalId}, {"exec_id", g->id}, {"command", g->command}});
    } else if (g->state == "running") {
        gated_.finish(execId, "failed", -1, "", "", "the client left before the command started");
    }
}

std::vector<GatedExec> SandboxController::pendingApprovals(const TenantScope& scope) {
    expireApprovals();
    return gated_.pending(scope);
}

GatedExec SandboxController::decideApproval(const std::string& tenant,
                                            const std::string& approvalId, bool approve,
                                            const std::string& reason,
                                            const std::string& decidedBy) {
    expireApprovals();
    auto g = isValidId(approvalId, "apr-") ? gated_.findByApproval(approvalId) : std::nullopt;
    if (!g || g->tenant != tenant) throw Error(ErrorCode::not_found, "no approval " + approvalId);
    std::string state = approve ? "running" : "denied";
    if (!gated_.decide(g->id, state, nowTimestamp(), decidedBy, reason))
        throw Error(ErrorCode::conflict, "approval " + approvalId + " was already decided (" +
                                             gated_.find(g->id)->state + ")");
    record(g->sandboxId, tenant, approve ? "approval.approved" : "approval.denied",
           {{"approval_id", approvalId},
            {"exec_id", g->id},
            {"command", g->command},
            {"class", g->commandClass},
            {"by", decidedBy},
            {"reason", reason}});
    auto decided = *gated_.find(g->id);
    auto parked = secrets_.openRequest(decided);
    if (parked.is_object() && parked.value("kind", "") == "package") {
        // Nothing runs: the package proxy lets the version through from now on.
        if (approve) gated_.finish(decided.id, "approved", 0, "", "", "");
        return *gated_.find(g->id);
    }
    if (parked.is_object() && parked.value("kind", "") == "publish") {
        PublishHandler handler;
        {
            std::lock_guard lock(hooksMutex_);
            handler = publishHandler_;
        }
        if (!handler) {
            if (approve)
                gated_.finish(decided.id, "failed", -1, "", "", "workspaces are not configured");
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
        if (!decisionWaiters_.notify(decided) && approve)
            gated_.finish(decided.id, "failed", -1, "", "", "the streaming client had left");
        return *gated_.find(g->id);
    }
    if (approve) runApproved(decided);
    return decided;
}

void SandboxController::runApproved(GatedExec g) {
    // Started here, finished on the agent's thread: nothing waits for it.
    auto fail = [this, g](const std::string& why) {
        gated_.finish(g.id, "failed", -1, "", "", why);
        record(g.sandboxId, g.tenant, "exec.failed",
               {{"command", g.command}, {"exec_id", g.id}, {"error", why}});
    };
    try {
        auto r = store_.find(g.sandboxId);
        if (!r) throw Error(ErrorCode::not_found, "the sandbox is gone");
        auto options = optionsFrom(secrets_.openRequest(g));
        options.trace = g.id;
        auto started = nowTimestamp();
        auto masker = std::make_shared<SecretMasker>(maskerFor(*r));
        bool test = isTestRun(*r, options);
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
                         gated_.finish(g.id, "exited", out->result.exit_code, out->stdoutData,
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

void SandboxController::cancelApprovalsOf(const std::string& sandboxId, const std::string& why) {
    for (const auto& g : gated_.pending(TenantScope::all())) {
        if (g.sandboxId != sandboxId) continue;
        if (gated_.decide(g.id, "cancelled", nowTimestamp(), "airlockd", why)) {
            record(g.sandboxId, g.tenant, "approval.cancelled",
                   {{"approval_id", g.approvalId},
                    {"exec_id", g.id},
                    {"command", g.command},
                    {"reason", why}});
            if (auto cancelled = gated_.find(g.id)) decisionWaiters_.notify(*cancelled);
        }
    }
}

void SandboxController::expireApprovals() {
    auto now = nowUnixSeconds();
    for (const auto& g : gated_.pending(TenantScope::all())) {
        if (g.expiresAt > now) continue;
        if (gated_.decide(g.id, "expired", nowTimestamp(), "airlockd", "no decision in time")) {
            record(g.sandboxId, g.tenant, "approval.expired",
                   {{"approval_id", g.approvalId}, {"exec_id", g.id}, {"command", g.command}});
            if (auto expired = gated_.find(g.id)) decisionWaiters_.notify(*expired);
        }
    }
}

GatedExec SandboxController::getExec(const std::string& tenant, const std::string& sandboxId,
                                     const std::string& execId) {
    expireApprovals();
    auto g = isValidId(execId, "ex-") ? gated_.find(execId) : std::nullopt;
    if (!g || g->tenant != tenant || g->sandboxId != sandboxId)
        throw Error(ErrorCode::not_found, "no exec " + execId);
    return *g;
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

GatedExec SandboxController::parkPublish(const SandboxRecord& r, const std::string& id,
                                         const std::string& command, const std::string& reason,
                                         const nlohmann::json& request) {
    expireApprovals();
    GatedExec g;
    g.id = id;
    g.approvalId = newId("apr-");
    g.sandboxId = r.id;
    g.tenant = r.tenant;
    nlohmann::json parked = request;
    parked["kind"] = "publish";
    g.requestJson = parked.dump();
    g.command = command;
    g.commandClass = "publish";
    g.reason = reason;
    g.requestedAt = nowTimestamp();
    g.expiresAt = nowUnixSeconds() + config_.approvalTimeoutS;
    gated_.insert(g);
    return g;
}

void SandboxController::awaitGated(const std::string& id, std::chrono::milliseconds within,
                                   std::function<void(GatedExec)> done) {
    auto deadline = std::chrono::steady_clock::now() + within;
    auto shared = std::make_shared<std::function<void(GatedExec)>>(std::move(done));
    auto check = std::make_shared<std::function<void()>>();
    std::weak_ptr<std::function<void()>> weakCheck = check;
    *check = [this, id, deadline, shared, weakCheck] {
        std::optional<GatedExec> g;
        try {
            g = findGated(id);
        } catch (const std::exception& e) {
            logError("controller", std::string("awaiting ") + id + ": " + e.what());
        }
        if (!g || g->state != "running" || std::chrono::steady_clock::now() >= deadline) {
            if (!g) {
                g = GatedExec{};
                g->id = id;
                g->state = "unknown";
            }
            (*shared)(*g);
            return;
        }
        if (auto self = weakCheck.lock())
            timers_.schedule(std::chrono::steady_clock::now() + std::chrono::milliseconds(200),
                             [self] { (*self)(); });
    };
    // The first look comes from the timer thread too: `done` never runs on the caller's.
    timers_.schedule(std::chrono::steady_clock::now() + std::chrono::milliseconds(50),
                     [check] { (*check)(); });
}

packages::PackageApprovalState SandboxController::packageApproval(
    const packages::PackageApprovalRequest& q) {
    using State = packages::PackageApprovalState::State;
    // One look-and-open at a time: parallel downloads of one version share
    // one approval, not one each.
    std::lock_guard serial(packageApprovalMutex_);
    expireApprovals();
    std::string key =
        std::string(packages::ecosystemName(q.ecosystem)) + ":" + q.name + "@" + q.version;
    std::string request = nlohmann::json{{"kind", "package"}, {"package", key}}.dump();
    if (auto g = gated_.findLatestRequest(q.sandboxId, request)) {
        // "running" is the moment between the decision and "approved".
        if (g->state == "approved" || g->state == "running")
            return {State::approved, g->approvalId};
        if (g->state == "pending_approval") return {State::pending, g->approvalId};
        if (g->state == "denied") return {State::denied, g->approvalId};
        // expired: asked again below
    }
    // A guest inventing package names cannot flood the approvers' list.
    std::size_t waiting = 0;
    for (const auto& p : gated_.pending(TenantScope::only(q.tenant)))
        if (p.sandboxId == q.sandboxId && p.commandClass == "package") ++waiting;
    if (waiting >= kMaxPendingPackageApprovals) return {State::denied, ""};
    GatedExec g;
    g.id = newId("ex-");
    g.approvalId = newId("apr-");
    g.sandboxId = q.sandboxId;
    g.tenant = q.tenant;
    g.requestJson = request;
    g.command = "install " + key;
    g.commandClass = "package";
    g.reason = q.reason;
    g.requestedAt = nowTimestamp();
    g.expiresAt = nowUnixSeconds() + config_.approvalTimeoutS;
    gated_.insert(g);
    record(q.sandboxId, q.tenant, "approval.requested",
           {{"approval_id", g.approvalId},
            {"package", key},
            {"class", "package"},
            {"reason", q.reason}});
    return {State::pending, g.approvalId};
}

void SandboxController::finishPublish(const std::string& id, const std::string& state,
                                      const std::string& error) {
    gated_.finish(id, state, state == "pushed" ? 0 : -1, "", "", error);
}

}  // namespace airlock

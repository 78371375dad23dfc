#include "controller/SandboxCommands.hpp"

#include <atomic>
#include <nlohmann/json.hpp>

#include "controller/MaskedOutput.hpp"
#include "core/AwaitedResult.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "protocol/Messages.hpp"
#include "protocol/Ops.hpp"

namespace airlock {
namespace {

constexpr std::size_t kAuditOutputBytes = 4096;

std::string clip(const std::string& s) {
    return s.size() > kAuditOutputBytes ? s.substr(0, kAuditOutputBytes) : s;
}

std::string whatOf(const std::exception_ptr& error) {
    try {
        std::rethrow_exception(error);
    } catch (const std::exception& e) {
        return e.what();
    } catch (...) {
    }
    return "unknown error";
}

}  // namespace

// ---------------------------------------------------------------- the policy gate

void SandboxCommands::requireAllowed(const SandboxRecord& r, const ExecOptions& options,
                                     const char* path) {
    auto v = p_.judge.judge(r, options);
    auto data = CommandJudge::auditData(r, options, path);
    data["policy"] = CommandJudge::verdictJson(v);
    auto masker = p_.sandboxes.guestOutputMasker(r);
    if (v.decision == policy::Decision::allow) {
        record(r, "exec.allowed", data, &masker);
        return;
    }
    record(r, "exec.denied", data, &masker);
    if (v.decision == policy::Decision::deny) throw CommandJudge::denied(v, masker);
    // Approval gates exist where a client can wait for the decision (the
    // REST exec answers 202, the WebSocket exec keeps the socket); a
    // background process start answers at once.
    throw Error(ErrorCode::policy_denied,
                masker.mask("needs approval (" + v.reason + "): run it with POST /v1/sandboxes/" +
                            r.id + "/exec or the WebSocket exec, which wait for a decision"));
}

PreparedCommand SandboxCommands::prepare(const SandboxRecord& r, const ExecOptions& options,
                                         const char* door) {
    requireAllowed(r, options, door);
    auto secrets = p_.secrets.open(r);  // decrypted once: injection and masking
    return PreparedCommand{agentRequest(r, options, secrets),
                           SandboxSecrets::guestOutputMasker(secrets)};
}

protocol::ExecRequest SandboxCommands::agentRequest(const SandboxRecord& r,
                                                    const ExecOptions& options,
                                                    const SecretMap& secrets) const {
    ExecOptions withSecrets = options;
    for (auto& [name, value] : SandboxSecrets::envFor(secrets, commandText(options)))
        withSecrets.env[name] = std::move(value);
    // The egress CA is trusted unless the command names its own roots.
    for (auto& [name, value] : SandboxSecrets::trustEnv(secrets))
        withSecrets.env.emplace(name, std::move(value));
    return toAgentRequest(withSecrets, p_.baseEnv(r));
}

// ---------------------------------------------------------------- REST exec

ExecOutput SandboxCommands::exec(const std::string& tenant, const std::string& id,
                                 const ExecOptions& options) {
    auto r = p_.sandboxes.requireOwned(tenant, id);
    requireAllowed(r, options, "exec");
    // Asleep with auto_resume: it wakes for a command the policy lets run.
    if (r.state == SandboxState::paused && r.autoResume) r = p_.sandboxes.requireRunning(tenant, id);
    AwaitedResult<ExecOutput> result;
    runAsync(r, options, result.callback());
    return result.get();  // the timer queue bounds it
}

ExecSubmission SandboxCommands::submit(const std::string& tenant, const std::string& id,
                                       const ExecOptions& options) {
    AwaitedResult<ExecOutput> result;
    if (auto pending = submitAsync(tenant, id, options, result.callback()))
        return ExecSubmission{std::nullopt, std::move(pending)};
    return ExecSubmission{result.get(), std::nullopt};  // the timer queue bounds it
}

std::optional<GatedExec> SandboxCommands::submitAsync(const std::string& tenant,
                                                      const std::string& id,
                                                      const ExecOptions& requested,
                                                      ExecCompletion done,
                                                      std::shared_ptr<ExecCancel> cancel) {
    ExecOptions options = requested;
    options.trace = newId("ex-");
    auto r = p_.sandboxes.requireRunning(tenant, id);
    auto v = p_.judge.judge(r, options);
    auto data = CommandJudge::auditData(r, options, nullptr);
    data["policy"] = CommandJudge::verdictJson(v);
    auto masker = std::make_shared<SecretMasker>(p_.sandboxes.guestOutputMasker(r));
    if (v.decision == policy::Decision::deny) {
        record(r, "exec.denied", data, masker.get());
        throw CommandJudge::denied(v, *masker);
    }
    if (v.decision == policy::Decision::approve)
        return p_.gates.parkExec(r, options, v, data, *masker, false);
    data["started_at"] = nowTimestamp();
    auto slot = p_.tenants.acquireExecSlot(tenant);  // concurrent_execs, held until it ends
    runAsync(r, options,
             [this, id = r.id, tenant = r.tenant, data, masker, slot, done = std::move(done)](
                 std::optional<ExecOutput> out, std::exception_ptr error) mutable {
                 if (out) {
                     latency_.observe(static_cast<double>(out->durationMs) / 1000.0);
                     data["exit_code"] = out->result.exit_code;
                     data["duration_ms"] = out->durationMs;
                     data["stdout"] = clip(out->stdoutData);
                     data["stderr"] = clip(out->stderrData);
                     data["truncated"] = out->truncated;
                     data["timed_out"] = out->result.timed_out;
                     p_.sandboxes.record(id, tenant, "exec.executed", data, masker.get());
                 } else {
                     data["error"] = whatOf(error);
                     p_.sandboxes.record(id, tenant, "exec.failed", data, masker.get());
                 }
                 done(std::move(out), error);
             },
             cancel);
    return std::nullopt;
}

void SandboxCommands::runApproved(GatedExec g) {
    // The audit record first: whoever sees the run's end finds it recorded.
    auto fail = [this, g](const std::string& why) {
        p_.sandboxes.record(g.sandboxId, g.tenant, "exec.failed",
                            {{"command", g.command}, {"exec_id", g.id}, {"error", why}}, nullptr);
        p_.gates.finish(g.id, "failed", -1, "", "", why);
    };
    try {
        auto r = p_.sandboxes.find(g.sandboxId);
        if (!r) throw Error(ErrorCode::not_found, "the sandbox is gone");
        auto options = p_.gates.parkedOptions(g);
        options.trace = g.id;
        auto started = nowTimestamp();
        auto masker = std::make_shared<SecretMasker>(p_.sandboxes.guestOutputMasker(*r));
        bool test = CommandJudge::isTestRun(*r, options);
        runAsync(*r, options,
                 [this, g, options, started, masker, fail, test](std::optional<ExecOutput> out,
                                                                 std::exception_ptr error) {
                     if (!out) return fail(masker->mask(whatOf(error)));
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
                     p_.sandboxes.record(g.sandboxId, g.tenant, "exec.executed", data,
                                         masker.get());
                     p_.gates.finish(g.id, "exited", out->result.exit_code, out->stdoutData,
                                     out->stderrData, out->result.error);
                 });
    } catch (const std::exception& e) {
        fail(e.what());
    }
}

void ExecCancel::attach(const std::shared_ptr<PendingExec>& pending, Audit audit) {
    std::optional<std::string> why;
    {
        std::lock_guard lock(mutex_);
        pending_ = pending;
        audit_ = std::move(audit);
        why = cancelled_;
    }
    if (why) cancel(*why);  // it came before the command started
}

void ExecCancel::cancel(const std::string& why) {
    std::shared_ptr<PendingExec> pending;
    Audit audit;
    {
        std::lock_guard lock(mutex_);
        if (stopped_) return;
        cancelled_ = why;
        pending = pending_.lock();
        if (!pending) return;  // not started yet: attach stops it
        stopped_ = true;
        audit = audit_;
    }
    if (pending->ended()) return;
    if (audit) audit(why);
    pending->cancel(Error(ErrorCode::conflict, "the command was cancelled: " + why));
}

void SandboxCommands::runAsync(const SandboxRecord& r, const ExecOptions& options,
                               ExecCompletion done, const std::shared_ptr<ExecCancel>& cancel) {
    requireRunningState(r);
    auto agent = p_.sandboxes.agentFor(r.id);
    // Secrets scoped to this command join its environment; whatever comes
    // back has every secret value masked.
    auto secrets = p_.secrets.open(r);  // decrypted once: injection and masking
    auto request = agentRequest(r, options, secrets);
    auto masker = std::make_shared<SecretMasker>(SandboxSecrets::guestOutputMasker(secrets));
    // Set once the deadline is scheduled, cancelled when the exec ends first.
    auto timer = std::make_shared<std::atomic<TimerQueue::Id>>(0);
    // Known as running in its sandbox (the package proxy's records name it).
    auto token = running_.add(r.id, masker->mask(commandText(options)));
    auto untrack = [this, sandbox = r.id, token] { running_.remove(sandbox, token); };
    std::shared_ptr<PendingExec> pending;
    try {
        pending =
            agent->execAsync(request, p_.outputCap,
                             [this, masker, timer, untrack, done = std::move(done)](
                                 std::optional<ExecOutput> out, std::exception_ptr error) {
                                 untrack();
                                 if (auto id = timer->exchange(0)) p_.timers.cancel(id);
                                 if (out && !masker->empty()) {
                                     out->stdoutData = masker->mask(std::move(out->stdoutData));
                                     out->stderrData = masker->mask(std::move(out->stderrData));
                                     out->result.error = masker->mask(std::move(out->result.error));
                                 }
                                 done(std::move(out), error);
                             });
    } catch (...) {
        untrack();
        throw;
    }
    // The agent enforces the command's own timeout; the extra margin covers
    // the channel and a loaded machine.
    if (cancel)
        cancel->attach(pending, [this, r, masker, command = commandText(options)](
                                    const std::string& why) {
            record(r, "exec.cancelled", {{"command", command}, {"reason", why}}, masker.get());
        });
    auto wait = std::chrono::milliseconds(request.timeout_ms) + std::chrono::seconds(15);
    std::weak_ptr<PendingExec> weak = pending;
    auto id = p_.timers.schedule(TimerQueue::Clock::now() + wait, [weak] {
        if (auto p = weak.lock())
            p->cancel(
                Error(ErrorCode::agent_timeout, "the agent did not finish the command in time"));
    });
    timer->store(id);
    // Ended before the deadline was stored: nothing would cancel it.
    if (pending->ended() && timer->exchange(0)) p_.timers.cancel(id);
}

// ---------------------------------------------------------------- streamed exec

SandboxCommands::StreamedExec SandboxCommands::openStreamed(
    const std::string& tenant, const std::string& id, const ExecOptions& options,
    const TerminalOptions& terminal, AgentStream::Handler handler, DecisionCallback onDecision) {
    auto r = p_.sandboxes.requireRunning(tenant, id);
    if (onDecision) {
        auto v = p_.judge.judge(r, options);
        if (v.decision == policy::Decision::approve) {
            auto masker = p_.sandboxes.guestOutputMasker(r);
            auto data = CommandJudge::auditData(r, options, "exec/ws");
            // Registered before anyone can decide: no decision is missed.
            std::string execId = newId("ex-");
            p_.gates.waiters().add(execId, std::move(onDecision));
            data["exec_id"] = execId;
            try {
                return StreamedExec{nullptr, p_.gates.parkExec(r, options, v, data, masker, true),
                                    execId};
            } catch (...) {
                p_.gates.waiters().remove(execId);
                throw;
            }
        }
    }
    ExecOptions traced = options;
    traced.trace = newId("ex-");
    requireAllowed(r, traced, "exec/ws");
    return StreamedExec{openStream(r, traced, terminal, std::move(handler)), std::nullopt,
                        traced.trace};
}

LineDecision SandboxCommands::judgeLine(const std::string& tenant, const std::string& id,
                                        const ExecOptions& terminal,
                                        const std::string& terminalExecId, const std::string& line,
                                        LineDecided decided) {
    auto r = p_.sandboxes.requireOwned(tenant, id);
    ExecOptions o = terminal;
    o.argv.clear();
    o.shell = line;
    o.stdinData.clear();
    o.purpose.clear();
    o.trace = newId("ex-");
    auto masker = p_.sandboxes.guestOutputMasker(r);
    auto v = p_.judge.judge(r, o);
    if (line.find_first_not_of(" \t") == std::string::npos) {
        v.decision = policy::Decision::deny;
        v.reason = "an empty line";
    }
    auto data = CommandJudge::auditData(r, o, "exec/ws");
    data["terminal"] = terminalExecId;
    data["reported_by"] = "guest shell";  // the guest's word: what its shell said it would run
    data["policy"] = CommandJudge::verdictJson(v);
    if (v.decision != policy::Decision::approve) {
        record(r, "exec.line", data, &masker);
        if (v.decision == policy::Decision::allow) return {"allow", "", "", o.trace};
        return {"deny", CommandJudge::denied(v, masker).what(), "", o.trace};
    }
    // Registered before anyone can decide: no decision is missed.
    p_.gates.waiters().add(o.trace, [this, decided](const GatedExec& g) {
        std::string by = g.decidedBy.empty() ? "" : " by " + g.decidedBy;
        std::string why = g.decisionReason.empty() ? "" : ": " + g.decisionReason;
        if (g.state != "running")
            return decided({"deny", "approval " + g.approvalId + " " + g.state + by + why,
                            g.approvalId, g.id});
        // The shell runs it now: the host never learns its exit code.
        p_.gates.waiters().start(g.id);
        p_.gates.finishStreamed(g.id, -1, "");
        decided({"allow", "approved" + by + why, g.approvalId, g.id});
    });
    try {
        auto g = p_.gates.parkExec(r, o, v, data, masker, true);
        return {"pending",
                "held for approval " + g.approvalId + " (" + masker.mask(v.reason) + ")",
                g.approvalId, o.trace};
    } catch (...) {
        p_.gates.waiters().remove(o.trace);
        throw;
    }
}

std::shared_ptr<AgentStream> SandboxCommands::openApproved(
    const std::string& tenant, const std::string& id, const std::string& execId,
    const ExecOptions& options, const TerminalOptions& terminal, AgentStream::Handler handler) {
    auto r = p_.sandboxes.requireOwned(tenant, id);
    auto g = p_.gates.find(execId);
    // Only what was approved runs, once: the same sandbox, the same request
    // (command, cwd, user, env, timeout, stdin).
    if (!g || g->sandboxId != id || g->state != "running" ||
        !p_.gates.sameStreamedRequest(*g, options))
        throw Error(ErrorCode::conflict,
                    "exec " + execId + " is not an approved command of this sandbox");
    if (r.state == SandboxState::paused && r.autoResume) r = p_.sandboxes.requireRunning(tenant, id);
    requireRunningState(r);
    p_.gates.waiters().start(execId);
    auto masker = p_.sandboxes.guestOutputMasker(r);
    record(r, "exec.allowed",
           {{"command", g->command},
            {"path", "exec/ws"},
            {"exec_id", execId},
            {"approval_id", g->approvalId}},
           &masker);
    ExecOptions traced = options;
    traced.trace = execId;
    return openStream(r, traced, terminal, std::move(handler));
}

std::shared_ptr<AgentStream> SandboxCommands::openStream(const SandboxRecord& r,
                                                         const ExecOptions& options,
                                                         const TerminalOptions& terminal,
                                                         AgentStream::Handler handler) {
    auto agent = p_.sandboxes.agentFor(r.id);
    auto secrets = p_.secrets.open(r);
    auto request = agentRequest(r, options, secrets);
    request.tty = terminal.tty;
    request.rows = terminal.rows;
    request.cols = terminal.cols;
    request.stdin_stream = terminal.stdinStream;
    request.judge_lines = linesJudged(options, terminal);
    // What this command was given only: a host-only value (a brokered git
    // credential) or a secret scoped to other commands in a streaming masker
    // makes its hold-back a prefix oracle.
    auto masker = std::make_shared<const SecretMasker>(
        SandboxSecrets::streamMasker(secrets, commandText(options)));
    // Its audit record (the command's text) is masked with every secret.
    auto recordMasker =
        std::make_shared<const SecretMasker>(SandboxSecrets::guestOutputMasker(secrets));
    // The audit log keeps how it ended, as for a REST exec (the output went
    // to the client; its size is kept, not its bytes).
    struct Ending {
        std::atomic<std::uint64_t> stdoutBytes{0}, stderrBytes{0};
        std::atomic<bool> recorded{false};
    };
    auto ending = std::make_shared<Ending>();
    auto data = CommandJudge::auditData(r, options, "exec/ws");
    data["started_at"] = nowTimestamp();
    auto startedMs = steadyMillis();
    AgentStream::Handler recording = [this, id = r.id, tenant = r.tenant, data, recordMasker, ending,
                                      startedMs,
                                      inner = std::move(handler)](AgentStream::Event&& e) mutable {
        using Kind = AgentStream::Event::Kind;
        if (e.kind == Kind::data)
            (e.channel == 2 ? ending->stderrBytes : ending->stdoutBytes) += e.payload.size();
        if ((e.kind == Kind::close || e.kind == Kind::reset) && !ending->recorded.exchange(true)) {
            nlohmann::json d = data;
            d["duration_ms"] = steadyMillis() - startedMs;
            d["stdout_bytes"] = ending->stdoutBytes.load();
            d["stderr_bytes"] = ending->stderrBytes.load();
            std::string type = "exec.executed";
            try {
                if (e.kind == Kind::reset)
                    throw std::runtime_error(protocol::parseResetInfo(e.payload).message);
                auto result = protocol::parseExecResult(e.payload);
                d["exit_code"] = result.exit_code;
                d["timed_out"] = result.timed_out;
                if (result.signal) d["signal"] = *result.signal;
                if (!result.error.empty()) {
                    d["error"] = result.error;
                    type = "exec.failed";
                }
            } catch (const std::exception& ex) {
                d["error"] = std::string("the stream ended: ") + ex.what();
                type = "exec.failed";
            }
            p_.sandboxes.record(id, tenant, type, d, recordMasker.get());
        }
        inner(std::move(e));
    };
    return MaskedOutput::open(*agent, request, masker, std::move(recording));
}

}  // namespace airlock

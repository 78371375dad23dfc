// SandboxController: the streamed exec (WebSocket), parked and approved, and
// the command its guest services start.
#include <atomic>
#include <nlohmann/json.hpp>

#include "controller/MaskedOutput.hpp"
#include "controller/SandboxController.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"
#include "protocol/Messages.hpp"
#include "protocol/Ops.hpp"

namespace airlock {

SandboxController::StreamedExec SandboxController::openExec(
    const std::string& tenant, const std::string& id, const ExecOptions& options,
    const TerminalOptions& terminal, AgentStream::Handler handler, DecisionCallback onDecision) {
    auto record = requireOwned(tenant, id);
    if (record.state != SandboxState::running)
        throw Error(ErrorCode::conflict,
                    "sandbox " + id + " is " + sandboxStateName(record.state) + ", not running");
    if (onDecision) {
        auto v = judge_.judge(record, options);
        if (v.decision == policy::Decision::approve) {
            auto masker = maskerFor(record);
            auto data = CommandJudge::auditData(record, options, "exec/ws");
            // Registered before anyone can decide: no decision is missed.
            std::string execId = newId("ex-");
            gates_.waiters().add(execId, std::move(onDecision));
            data["exec_id"] = execId;
            try {
                return StreamedExec{nullptr,
                                    gates_.parkExec(record, options, v, data, masker, true)};
            } catch (...) {
                gates_.waiters().remove(execId);
                throw;
            }
        }
    }
    ExecOptions traced = options;
    traced.trace = newId("ex-");
    requireAllowed(record, traced, "exec/ws");
    return StreamedExec{openStreamedExec(record, traced, terminal, std::move(handler)),
                        std::nullopt};
}

std::shared_ptr<AgentStream> SandboxController::openStreamedExec(const SandboxRecord& record,
                                                                 const ExecOptions& options,
                                                                 const TerminalOptions& terminal,
                                                                 AgentStream::Handler handler) {
    auto agent = agentFor(record.id);
    auto secrets = secrets_.open(record);
    auto request = agentRequest(record, options, secrets);
    request.tty = terminal.tty;
    request.rows = terminal.rows;
    request.cols = terminal.cols;
    request.stdin_stream = terminal.stdinStream;
    auto masker = std::make_shared<const SecretMasker>(secrets_.maskerOf(record, secrets));
    // The audit log keeps how it ended, as for a REST exec (the output went
    // to the client; its size is kept, not its bytes).
    struct Ending {
        std::atomic<std::uint64_t> stdoutBytes{0}, stderrBytes{0};
        std::atomic<bool> recorded{false};
    };
    auto ending = std::make_shared<Ending>();
    auto data = CommandJudge::auditData(record, options, "exec/ws");
    data["started_at"] = nowTimestamp();
    auto startedMs = steadyMillis();
    AgentStream::Handler recording = [this, sandbox = record.id, tenant = record.tenant, data,
                                      masker, ending, startedMs,
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
            this->record(sandbox, tenant, type, d, masker.get());
        }
        inner(std::move(e));
    };
    return MaskedOutput::open(*agent, request, masker, std::move(recording));
}

std::shared_ptr<AgentStream> SandboxController::openApprovedExec(
    const std::string& tenant, const std::string& id, const std::string& execId,
    const ExecOptions& options, const TerminalOptions& terminal, AgentStream::Handler handler) {
    auto sandbox = requireOwned(tenant, id);
    auto g = gates_.find(execId);
    // Only what was approved runs, once: the same sandbox, the same request
    // (command, cwd, user, env, timeout, stdin).
    if (!g || g->sandboxId != id || g->state != "running" ||
        !gates_.sameStreamedRequest(*g, options))
        throw Error(ErrorCode::conflict,
                    "exec " + execId + " is not an approved command of this sandbox");
    if (sandbox.state != SandboxState::running)
        throw Error(ErrorCode::conflict,
                    "sandbox " + id + " is " + sandboxStateName(sandbox.state) + ", not running");
    gates_.waiters().start(execId);
    auto masker = maskerFor(sandbox);
    record(id, tenant, "exec.allowed",
           {{"command", g->command},
            {"path", "exec/ws"},
            {"exec_id", execId},
            {"approval_id", g->approvalId}},
           &masker);
    ExecOptions traced = options;
    traced.trace = execId;
    return openStreamedExec(sandbox, traced, terminal, std::move(handler));
}

PreparedCommand SandboxController::prepareCommand(const SandboxRecord& r,
                                                  const ExecOptions& options, const char* door) {
    requireAllowed(r, options, door);
    auto secrets = secrets_.open(r);  // decrypted once: injection and masking
    return PreparedCommand{agentRequest(r, options, secrets), secrets_.maskerOf(r, secrets)};
}

}  // namespace airlock

#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "agentclient/AgentStream.hpp"
#include "controller/ApprovalGates.hpp"
#include "controller/CommandJudge.hpp"
#include "controller/ExecOptions.hpp"
#include "controller/RunningCommands.hpp"
#include "controller/SandboxAccess.hpp"
#include "controller/SandboxSecrets.hpp"
#include "controller/TenantLimits.hpp"
#include "core/LatencyHistogram.hpp"
#include "core/TimerQueue.hpp"
#include "protocol/Messages.hpp"

namespace airlock {

// What POST .../exec did: ran it, or parked it for a human decision.
struct ExecSubmission {
    std::optional<ExecOutput> output;
    std::optional<GatedExec> pending;
};

// Terminal settings for a streamed exec.
struct TerminalOptions {
    bool tty = false;
    unsigned rows = 24, cols = 80;
    bool stdinStream = true;  // stdin comes from the client until it sends EOF
    // Set by a door that answers the guest's LineToJudge frames (judgeLine),
    // never by a client: an interactive bash then asks before each line.
    bool judgeLines = false;
};

// Whether a terminal's lines are judged one by one: a door that answers
// them asked for it, on a tty, and the command is an interactive bash. The
// one test for the agent's request (judge_lines) and for the door that must
// then answer every line.
inline bool linesJudged(const ExecOptions& options, const TerminalOptions& terminal) {
    return terminal.judgeLines && terminal.tty && !options.shell &&
           protocol::isJudgeableShell(options.argv);
}

// What the command policy said of a terminal's line: "allow", "deny" (with
// why), or "pending" (held for approval `approvalId`; the decision follows).
struct LineDecision {
    std::string state;
    std::string message;
    std::string approvalId;
    std::string lineId;  // the line's exec id in the audit log
};

// Commands in a sandbox, every path shaped like Kata's rpc.rs handlers:
// trace (an exec id) -> policy check (CommandJudge; audited) -> run. The
// REST exec runs or parks a command (ApprovalGates), the WebSocket exec
// streams one, an approved one runs here; the background processes'
// starts come through prepare(). Each command gets the sandbox's
// environment and the secrets scoped to it, its output masked, its
// deadline on the timer queue (no thread waits for a command), and is
// known as running in its sandbox while it runs (RunningCommands).
// A REST exec's stop switch (an MCP client's notifications/cancelled):
// cancel() kills the command in the guest (its stream reset), audits
// exec.cancelled with the reason, and the exec's completion gets
// Error(conflict). Any thread, before the command started or after it
// ended (then it does nothing).
class ExecCancel {
  public:
    void cancel(const std::string& why);

  private:
    friend class SandboxCommands;
    using Audit = std::function<void(const std::string& why)>;
    void attach(const std::shared_ptr<PendingExec>& pending, Audit audit);
    std::mutex mutex_;
    std::weak_ptr<PendingExec> pending_;
    Audit audit_;
    std::optional<std::string> cancelled_;
    bool stopped_ = false;
};

class SandboxCommands {
  public:
    // Every command's environment before its own: the sandbox's, plus the
    // egress proxy's variables when it has a network.
    using BaseEnv = std::function<std::map<std::string, std::string>(const SandboxRecord&)>;
    struct Parts {
        SandboxAccess& sandboxes;
        const CommandJudge& judge;
        ApprovalGates& gates;
        const SandboxSecrets& secrets;
        TenantLimits& tenants;
        TimerQueue& timers;
        BaseEnv baseEnv;
        std::size_t outputCap;  // per stream of a REST exec
    };
    explicit SandboxCommands(Parts parts) : p_(std::move(parts)) {}

    // Judged by the command policy first: denied -> Error(policy_denied); a
    // command that needs approval -> Error(policy_denied) too (submit parks
    // those instead).
    ExecOutput exec(const std::string& tenant, const std::string& id, const ExecOptions& options);
    // The REST exec, with approval gates: its output, or the parked command.
    ExecSubmission submit(const std::string& tenant, const std::string& id,
                          const ExecOptions& options);
    // The same without holding the caller's thread while the command runs:
    // a parked command is returned at once; an allowed one's output (or
    // error) arrives on `done`, called once from another thread.
    using ExecCompletion = std::function<void(std::optional<ExecOutput>, std::exception_ptr)>;
    std::optional<GatedExec> submitAsync(const std::string& tenant, const std::string& id,
                                         const ExecOptions& options, ExecCompletion done,
                                         std::shared_ptr<ExecCancel> cancel = nullptr);
    // Runs an approved REST exec (its gate was decided): started here,
    // finished and audited on the agent's thread.
    void runApproved(GatedExec g);

    // Streamed exec: output arrives on `handler` (push mode) as it is
    // produced, with the sandbox's secrets masked. A command that needs
    // approval is parked (`pending`) when the caller can wait for the
    // decision (`onDecision`, called once, from another thread: approved,
    // denied, expired); without one it is refused.
    using DecisionCallback = std::function<void(const GatedExec&)>;
    struct StreamedExec {
        std::shared_ptr<AgentStream> stream;
        std::optional<GatedExec> pending;
        std::string execId;  // the running command's (its audit records' exec_id)
    };
    StreamedExec openStreamed(const std::string& tenant, const std::string& id,
                              const ExecOptions& options, const TerminalOptions& terminal,
                              AgentStream::Handler handler, DecisionCallback onDecision = nullptr);
    // Runs a parked streamed exec once approved; `options` must be the ones
    // it was submitted with.
    std::shared_ptr<AgentStream> openApproved(const std::string& tenant, const std::string& id,
                                              const std::string& execId, const ExecOptions& options,
                                              const TerminalOptions& terminal,
                                              AgentStream::Handler handler);

    // A line the shell of a judged terminal (`terminalExecId`, run with
    // `terminal`'s options by the same caller) is about to run, as its guest
    // reported it: judged by the command policy like an exec, recorded
    // (exec.line, reported_by "guest shell"), and when it needs approval
    // parked as a gate: then "pending" now and the decision on `decided`
    // later, once, from another thread.
    using LineDecided = std::function<void(const LineDecision&)>;
    LineDecision judgeLine(const std::string& tenant, const std::string& id,
                           const ExecOptions& terminal, const std::string& terminalExecId,
                           const std::string& line, LineDecided decided);

    // Withdraws a terminal's line held for approval (its terminal is gone).
    void abandonLine(const std::string& lineExecId) { p_.gates.abandonStreamed(lineExecId); }
    TimerQueue& timers() { return p_.timers; }

    // A command judged (anything but allow is refused, and audited; `door`
    // names the route) and made ready for the agent: what SandboxAccess's
    // prepareCommand gives the guest services.
    // What the command policy says of a command in the caller's sandbox
    // (Error(not_found) when the sandbox is not the caller's), nothing run
    // or recorded: a door that handles approvals its own way asks first.
    policy::Verdict judge(const std::string& tenant, const std::string& id,
                          const ExecOptions& options) const {
        return p_.judge.judge(p_.sandboxes.requireOwned(tenant, id), options);
    }
    PreparedCommand prepare(const SandboxRecord& r, const ExecOptions& options, const char* door);

    // The one command running in a sandbox through exec (masked), or "" when
    // none or several: what the package proxy's records name.
    std::string soleRunning(const std::string& sandboxId) const { return running_.sole(sandboxId); }
    // REST exec durations, for /metrics.
    const LatencyHistogram& latency() const { return latency_; }

  private:
    // The policy gate of the streamed paths: anything but allow is refused
    // there, and audited.
    void requireAllowed(const SandboxRecord& r, const ExecOptions& options, const char* path);
    // Starts the command; `done` gets its masked output or error. The
    // command's timeout plus a margin is enforced by the timer queue.
    void runAsync(const SandboxRecord& r, const ExecOptions& options, ExecCompletion done,
                  const std::shared_ptr<ExecCancel>& cancel = nullptr);
    // The request the agent gets: the sandbox's environment, then the
    // command's, then the secrets scoped to it.
    protocol::ExecRequest agentRequest(const SandboxRecord& r, const ExecOptions& options,
                                       const SecretMap& secrets) const;
    std::shared_ptr<AgentStream> openStream(const SandboxRecord& r, const ExecOptions& options,
                                            const TerminalOptions& terminal,
                                            AgentStream::Handler handler);
    void record(const SandboxRecord& r, const std::string& type, const nlohmann::json& data,
                const SecretMasker* masker) {
        p_.sandboxes.record(r.id, r.tenant, type, data, masker);
    }

    Parts p_;
    RunningCommands running_;
    LatencyHistogram latency_;
};

}  // namespace airlock

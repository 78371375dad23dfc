#include "controller/ApprovalGates.hpp"

#include "controller/CommandJudge.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"
#include "core/Sha256.hpp"

namespace airlock {

namespace {

constexpr const char* kDigestDomain = "airlock approval request v1\n";

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

}  // namespace

std::string ApprovalGates::requestDigest(const std::string& sandboxId,
                                         const nlohmann::json& request) {
    // nlohmann's objects keep their keys sorted: dump() is canonical.
    return sha256Hex(std::string(kDigestDomain) +
                     nlohmann::json{{"sandbox", sandboxId}, {"request", request}}.dump());
}

nlohmann::json ApprovalGates::execRequestJson(const ExecOptions& options, bool streamed) {
    auto request = optionsJson(options);
    // A streamed one runs only while its client waits (SandboxCommands::openApproved).
    if (streamed) request["stream"] = true;
    return request;
}

nlohmann::json ApprovalGates::verifiedRequest(const GatedExec& g) const {
    if (g.requestDigest.empty())
        throw Error(ErrorCode::conflict, "approval " + g.approvalId +
                                             " binds no request digest (parked by an older "
                                             "airlockd): nothing runs under it; ask again");
    auto request = secrets_.openRequest(g);
    if (request.is_discarded() || requestDigest(g.sandboxId, request) != g.requestDigest)
        throw Error(ErrorCode::conflict, "the parked request of approval " + g.approvalId +
                                             " is not the one it was approved as (digest "
                                             "differs): nothing runs under it");
    return request;
}

GatedExec ApprovalGates::parkExec(const SandboxRecord& r, const ExecOptions& options,
                                  const policy::Verdict& v, nlohmann::json data,
                                  const SecretMasker& masker, bool streamed) {
    GatedExec g;
    g.id = data.contains("exec_id") ? data["exec_id"].get<std::string>() : newId("ex-");
    g.approvalId = newId("apr-");
    g.sandboxId = r.id;
    g.tenant = r.tenant;
    auto request = execRequestJson(options, streamed);
    g.requestDigest = requestDigest(r.id, request);
    g.requestJson = secrets_.sealRequest(r, request.dump());
    // What decides the run, as the approver sees it: data masked value by
    // value (never the rendered page); sizes and digests from the raw bytes.
    nlohmann::json env = nlohmann::json::array();
    for (const auto& [name, value] : options.env) env.push_back({{"name", name}, {"value", value}});
    // The sandbox's own variables (set at create) sit under the command's.
    nlohmann::json sandboxEnv = nlohmann::json::array();
    for (const auto& [name, value] : parseEnvJson(r.envJson))
        if (!options.env.count(name)) sandboxEnv.push_back({{"name", name}, {"value", value}});
    nlohmann::json injected = nlohmann::json::array();
    for (const auto& [name, value] : SandboxSecrets::envFor(secrets_.open(r), commandText(options)))
        injected.push_back(name);
    nlohmann::json shown{{"command", commandText(options)},
                         {"cwd", options.cwd},
                         {"user", options.user.empty() ? "user" : options.user},
                         {"env", env},
                         {"sandbox_env", sandboxEnv},
                         {"secrets", injected},
                         {"policy", CommandJudge::verdictJson(v)}};
    if (options.shell)
        shown["shell"] = *options.shell;
    else
        shown["argv"] = options.argv;
    shown = maskRecord(shown, masker);
    shown["kind"] = "exec";
    shown["timeout_s"] = options.timeoutS;
    shown["stdin"] = {{"bytes", options.stdinData.size()},
                      {"sha256", sha256Hex(options.stdinData)},
                      // A streamed exec's client sends more once it runs.
                      {"streamed", streamed}};
    if (CommandJudge::isTestRun(r, options)) shown["purpose"] = "test";
    shown["request_digest"] = g.requestDigest;
    g.shownJson = shown.dump();
    g.command = masker.mask(commandText(options));  // what approvers, the API and the audit show
    g.commandClass = policy::className(v.commandClass);
    g.reason = v.reason;
    g.requestedAt = nowTimestamp();
    g.expiresAt = nowUnixSeconds() + approvalTimeoutS_;
    gated_.insert(g);
    announce(g);
    data["policy"] = CommandJudge::verdictJson(v);
    data["exec_id"] = g.id;
    data["approval_id"] = g.approvalId;
    data["request_digest"] = g.requestDigest;
    audit_.record(r.id, r.tenant, "exec.pending_approval", data, &masker);
    return g;
}

GatedExec ApprovalGates::parkPublish(const SandboxRecord& r, const std::string& id,
                                     const std::string& command, const std::string& reason,
                                     const nlohmann::json& request) {
    expire();
    GatedExec g;
    g.id = id;
    g.approvalId = newId("apr-");
    g.sandboxId = r.id;
    g.tenant = r.tenant;
    nlohmann::json parked = request;
    parked["kind"] = "publish";
    g.requestJson = parked.dump();
    g.requestDigest = requestDigest(r.id, parked);
    nlohmann::json shown = parked;
    shown["request_digest"] = g.requestDigest;
    g.shownJson = shown.dump();
    g.command = command;
    g.commandClass = "publish";
    g.reason = reason;
    g.requestedAt = nowTimestamp();
    g.expiresAt = nowUnixSeconds() + approvalTimeoutS_;
    gated_.insert(g);
    announce(g);
    return g;
}

packages::PackageApprovalState ApprovalGates::packageApproval(
    const packages::PackageApprovalRequest& q) {
    using State = packages::PackageApprovalState::State;
    // One look-and-open at a time: parallel downloads of one version share
    // one approval, not one each.
    std::lock_guard serial(packageMutex_);
    expire();
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
    g.requestDigest = requestDigest(q.sandboxId, nlohmann::json::parse(request));
    g.shownJson = nlohmann::json{{"kind", "package"}, {"package", key}, {"request_digest", g.requestDigest}}.dump();
    g.command = "install " + key;
    g.commandClass = "package";
    g.reason = q.reason;
    g.requestedAt = nowTimestamp();
    g.expiresAt = nowUnixSeconds() + approvalTimeoutS_;
    gated_.insert(g);
    announce(g);
    audit_.record(q.sandboxId, q.tenant, "approval.requested",
                  {{"approval_id", g.approvalId},
                   {"package", key},
                   {"class", "package"},
                   {"reason", q.reason}});
    return {State::pending, g.approvalId};
}

ApprovalGates::Decision ApprovalGates::decide(const std::string& tenant,
                                              const std::string& approvalId, bool approve,
                                              const std::string& reason,
                                              const std::string& decidedBy,
                                              const std::string& expectDigest) {
    expire();
    auto g = isValidId(approvalId, "apr-") ? gated_.findByApproval(approvalId) : std::nullopt;
    if (!g || g->tenant != tenant) throw Error(ErrorCode::not_found, "no approval " + approvalId);
    // The approver named what they read: anything else is not decided.
    if (!expectDigest.empty() && expectDigest != g->requestDigest)
        throw Error(ErrorCode::conflict, "approval " + approvalId +
                                             " is for another request than the digest given (" +
                                             g->requestDigest + ")");
    std::string state = approve ? "running" : "denied";
    if (!gated_.decide(g->id, state, nowTimestamp(), decidedBy, reason))
        throw Error(ErrorCode::conflict, "approval " + approvalId + " was already decided (" +
                                             gated_.find(g->id)->state + ")");
    audit_.record(g->sandboxId, tenant, approve ? "approval.approved" : "approval.denied",
                  {{"approval_id", approvalId},
                   {"exec_id", g->id},
                   {"command", g->command},
                   {"class", g->commandClass},
                   {"by", decidedBy},
                   {"reason", reason},
                   {"request_digest", g->requestDigest}});
    auto decided = *gated_.find(g->id);
    return Decision{decided, secrets_.openRequest(decided)};
}

GatedExec ApprovalGates::approval(const std::string& tenant, const std::string& approvalId) {
    expire();
    auto g = isValidId(approvalId, "apr-") ? gated_.findByApproval(approvalId) : std::nullopt;
    if (!g || g->tenant != tenant) throw Error(ErrorCode::not_found, "no approval " + approvalId);
    return *g;
}

std::vector<GatedExec> ApprovalGates::supersedePublishes(const std::string& sandboxId,
                                                         const std::string& why) {
    std::vector<GatedExec> out;
    for (const auto& g : gated_.pending(TenantScope::all())) {
        if (g.sandboxId != sandboxId || g.commandClass != "publish") continue;
        // Only from pending: an approval decided at the same moment wins or loses here.
        if (!gated_.decide(g.id, "superseded", nowTimestamp(), "airlockd", why)) continue;
        audit_.record(g.sandboxId, g.tenant, "approval.superseded",
                      {{"approval_id", g.approvalId},
                       {"push_id", g.id},
                       {"command", g.command},
                       {"reason", why}});
        if (auto now = gated_.find(g.id)) out.push_back(*now);
    }
    return out;
}

std::vector<GatedExec> ApprovalGates::pending(const TenantScope& scope) {
    expire();
    return gated_.pending(scope);
}

GatedExec ApprovalGates::get(const std::string& tenant, const std::string& sandboxId,
                             const std::string& execId) {
    expire();
    auto g = isValidId(execId, "ex-") ? gated_.find(execId) : std::nullopt;
    if (!g || g->tenant != tenant || g->sandboxId != sandboxId)
        throw Error(ErrorCode::not_found, "no exec " + execId);
    return *g;
}

void ApprovalGates::announce(const GatedExec& g) {
    Opened hook;
    {
        std::lock_guard lock(hookMutex_);
        hook = opened_;
    }
    if (!hook) return;
    try {
        hook(g);
    } catch (const std::exception& e) {
        logWarn("approvals", "the fleet has no record of " + g.approvalId + ": " + e.what());
    }
}

void ApprovalGates::expire() {
    auto now = nowUnixSeconds();
    for (const auto& g : gated_.pending(TenantScope::all())) {
        if (g.expiresAt > now) continue;
        if (gated_.decide(g.id, "expired", nowTimestamp(), "airlockd", "no decision in time")) {
            audit_.record(
                g.sandboxId, g.tenant, "approval.expired",
                {{"approval_id", g.approvalId}, {"exec_id", g.id}, {"command", g.command}});
            if (auto expired = gated_.find(g.id)) waiters_.notify(*expired);
        }
    }
}

void ApprovalGates::cancelOf(const std::string& sandboxId, const std::string& why) {
    for (const auto& g : gated_.pending(TenantScope::all())) {
        if (g.sandboxId != sandboxId) continue;
        if (gated_.decide(g.id, "cancelled", nowTimestamp(), "airlockd", why)) {
            audit_.record(g.sandboxId, g.tenant, "approval.cancelled",
                          {{"approval_id", g.approvalId},
                           {"exec_id", g.id},
                           {"command", g.command},
                           {"reason", why}});
            if (auto cancelled = gated_.find(g.id)) waiters_.notify(*cancelled);
        }
    }
}

void ApprovalGates::await(const std::string& id, std::chrono::milliseconds within,
                          std::function<void(GatedExec)> done) {
    auto deadline = std::chrono::steady_clock::now() + within;
    auto shared = std::make_shared<std::function<void(GatedExec)>>(std::move(done));
    auto check = std::make_shared<std::function<void()>>();
    std::weak_ptr<std::function<void()>> weakCheck = check;
    *check = [this, id, deadline, shared, weakCheck] {
        std::optional<GatedExec> g;
        try {
            g = gated_.find(id);
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

bool ApprovalGates::sameStreamedRequest(const GatedExec& g, const ExecOptions& options) const {
    if (requestDigest(g.sandboxId, execRequestJson(options, true)) != g.requestDigest)
        return false;
    try {
        verifiedRequest(g);
    } catch (const Error&) {
        return false;
    }
    return true;
}

void ApprovalGates::abandonStreamed(const std::string& execId) {
    waiters_.remove(execId);
    auto g = gated_.find(execId);
    if (!g) return;
    if (gated_.decide(execId, "cancelled", nowTimestamp(), "airlockd",
                      "the client left before a decision")) {
        audit_.record(
            g->sandboxId, g->tenant, "approval.cancelled",
            {{"approval_id", g->approvalId}, {"exec_id", g->id}, {"command", g->command}});
    } else if (g->state == "running") {
        gated_.finish(execId, "failed", -1, "", "", "the client left before the command started");
    }
}

void ApprovalGates::finishStreamed(const std::string& execId, int exitCode,
                                   const std::string& error) {
    // Its output went to the client; the record keeps how it ended.
    gated_.finish(execId, error.empty() ? "exited" : "failed", exitCode, "", "", error);
    waiters_.finished(execId);
}

ExecOptions ApprovalGates::parkedOptions(const GatedExec& g) const {
    return optionsFrom(verifiedRequest(g));
}

}  // namespace airlock

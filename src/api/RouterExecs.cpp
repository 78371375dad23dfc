// The command routes: buffered execs (held for approval when the policy says
// so), approvals, and the package and audit records of a sandbox.
#include "api/ErrorMapping.hpp"
#include "api/RequestParsing.hpp"
#include "api/Router.hpp"
#include "core/Error.hpp"
#include "core/JsonFields.hpp"
#include "packages/PackageRules.hpp"

namespace airlock::api {
using nlohmann::json;

// POST /v1/sandboxes/{}/exec
void Router::execInSandbox(Context& c, Respond respond) {
    // Existence first: a missing sandbox is 404 whatever the body says.
    services_.sandboxes.get(c.tenant, c.params[0]);
    auto options = parseExec(c.request.body);
    options.caller = callerName(c.principal);
    // No thread waits for the command: its end answers the request.
    ApiRequest label{c.request.method, c.request.path, {}, {}, {}, {}, {}, {}, {}};
    auto pending = services_.commands.submitAsync(
        c.tenant, c.params[0], options,
        [respond, label](std::optional<ExecOutput> out, std::exception_ptr error) {
            if (out) return respond(jsonResponse(200, execOutputJson(*out)));
            respond(renderError(ErrorShape::native, errorStatusFor(error, label)));
        });
    if (pending) {
        // Held for a human: 202 with the handles to follow it.
        auto j = gatedExecJson(*pending);
        respond(jsonResponse(202, {{"exec_id", j["exec_id"]},
                                   {"approval_id", j["approval_id"]},
                                   {"state", j["state"]},
                                   {"class", j["class"]},
                                   {"reason", j["reason"]},
                                   {"expires_at", j["expires_at"]}}));
    }
}

// GET /v1/sandboxes/{}/execs/{}
ApiResponse Router::getExec(Context& c) {
    return jsonResponse(200,
                        gatedExecJson(services_.gates.get(c.tenant, c.params[0], c.params[1])));
}

namespace {

// The approval's own state: pending, then approved (whatever the run or
// push then did: record_state), denied, expired, cancelled or superseded.
std::string approvalState(const GatedExec& g) {
    if (g.state == "pending_approval") return "pending";
    for (const char* s : {"denied", "expired", "cancelled", "superseded"})
        if (g.state == s) return g.state;
    return "approved";
}

// An approval as approvers read it: the record, and what decides the run
// as it was parked (secrets masked there; digests and sizes of the raw
// request). Only the fields the API describes are copied.
json approvalJson(const GatedExec& g, bool admin) {
    auto gj = gatedExecJson(g);
    json j{{"id", g.approvalId},
           {"exec_id", g.id},
           {"sandbox", g.sandboxId},
           {"command", g.command},
           {"class", g.commandClass},
           {"reason", g.reason},
           {"requested_at", g.requestedAt},
           {"expires_at", gj["expires_at"]},
           {"state", approvalState(g)},
           {"record_state", g.state},
           {"request_digest", g.requestDigest.empty() ? json(nullptr) : json(g.requestDigest)}};
    if (gj.contains("decision")) j["decision"] = gj["decision"];
    auto shown = g.shownJson.empty() ? json() : json::parse(g.shownJson, nullptr, false);
    if (shown.is_object()) {
        for (const char* k :
             {"kind", "cwd", "user", "env", "sandbox_env", "secrets", "policy", "shell", "argv", "timeout_s",
              "stdin", "purpose", "masked", "repo", "branch", "commit", "tree", "base", "lease",
              "diffstat", "evidence", "evidence_reason", "push_id", "package"})
            if (shown.contains(k)) j[k] = shown[k];
    }
    if (admin) j["tenant"] = g.tenant;
    return j;
}

}  // namespace

// GET /v1/approvals
ApiResponse Router::listApprovals(Context& c) {
    json list = json::array();
    for (const auto& g : services_.gates.pending(c.scope()))
        list.push_back(withNode(approvalJson(g, c.admin())));
    if (fleet_ && c.principal.forwardedBy.empty()) addFleetList(c, "/v1/approvals", "approvals", list);
    return jsonResponse(200, {{"approvals", list}});
}

// GET /v1/approvals/{}
ApiResponse Router::getApproval(Context& c) {
    return jsonResponse(200,
                        approvalJson(services_.gates.approval(c.tenant, c.params[0]), c.admin()));
}

// POST /v1/approvals/{}
void Router::decideApproval(Context& c, Respond respond) {
    auto decision = parseApprovalDecision(c.request.body);
    // The deciding key by id and name, not just its tenant.
    auto g = services_.approvals.decideApproval(c.tenant, c.params[0], decision.approve, decision.reason,
                                        callerName(c.principal),
                                        decision.requestDigest);
    if (g.state != "running") return respond(jsonResponse(200, gatedExecJson(g)));
    // An approved command is answered with its outcome when it ends
    // within a bounded wait (else with its state then: GET the exec
    // later). No thread waits: the controller's timer looks again.
    services_.gates.await(g.id, std::chrono::seconds(120), [respond](GatedExec now) {
        respond(jsonResponse(200, gatedExecJson(now)));
    });
}

// GET /v1/sandboxes/{}/packages
ApiResponse Router::listSandboxPackages(Context& c) {
    // The package proxy's records of this sandbox, oldest first.
    auto param = [&](const char* k) {
        return c.request.query.count(k) ? c.request.query.at(k) : std::string();
    };
    std::string ecosystem = param("ecosystem"), decision = param("decision");
    if (!ecosystem.empty() && !packages::parseEcosystem(ecosystem))
        throw Error(ErrorCode::bad_request, "'ecosystem' must be npm, pypi or apt");
    if (!decision.empty() && decision != "allow" && decision != "deny" && decision != "approve")
        throw Error(ErrorCode::bad_request, "'decision' must be allow, deny or approve");
    AuditQuery q;
    q.type = "package.";
    q.limit = 10000;
    json list = json::array();
    for (const auto& e : services_.audit.audit(c.tenant, c.params[0], q)) {
        auto data = json::parse(e.dataJson, nullptr, false);
        if (!data.is_object()) continue;
        if (!ecosystem.empty() && data.value("ecosystem", "") != ecosystem) continue;
        if (!decision.empty() && data.value("decision", "") != decision) continue;
        json item{{"seq", e.seq}, {"at", e.at}, {"type", e.type}};
        item.update(data);
        list.push_back(std::move(item));
    }
    return jsonResponse(200, {{"packages", list}});
}

// GET /v1/sandboxes/{}/audit
ApiResponse Router::listSandboxAudit(Context& c) {
    AuditQuery q;
    auto param = [&](const char* k) {
        return c.request.query.count(k) ? c.request.query.at(k) : std::string();
    };
    q.type = param("type");
    q.since = param("since");
    auto number = [&](const char* k, std::int64_t def, std::int64_t max) -> std::int64_t {
        std::string v = param(k);
        if (v.empty()) return def;
        if (v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos)
            throw Error(ErrorCode::bad_request,
                        std::string("'") + k + "' must be a non-negative integer");
        return std::min<std::int64_t>(std::stoll(v), max);
    };
    q.after = number("after", 0, INT64_MAX);
    q.limit = static_cast<int>(number("limit", 200, 1000));
    json events = json::array();
    std::int64_t last = q.after;
    for (const auto& e : services_.audit.audit(c.tenant, c.params[0], q)) {
        events.push_back(auditEventJson(e));
        last = e.seq;
    }
    json out{{"events", events}};
    if (static_cast<int>(events.size()) == q.limit) out["next_after"] = last;
    return jsonResponse(200, out);
}

}  // namespace airlock::api

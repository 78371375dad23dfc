#include "api/Router.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/E2bApi.hpp"
#include "api/E2bEnvd.hpp"
#include "api/ErrorMapping.hpp"
#include "api/McpExchange.hpp"
#include "api/IncomingMoves.hpp"
#include "api/RequestParsing.hpp"
#include "api/SandboxMover.hpp"
#include "core/Clock.hpp"
#include "core/JsonFields.hpp"
#include "core/Log.hpp"
#include "evidence/EvidenceService.hpp"
#include "fleet/Fleet.hpp"
#include "fleet/HttpExchange.hpp"
#include "packages/PackageRules.hpp"

namespace airlock::api {

Route& Router::add(std::string method, const std::string& pattern, Roles roles, Handler handler) {
    Route r;
    r.method = std::move(method);
    RouteTable::setPattern(r, pattern);
    r.roles = roles;
    r.handler = [handler = std::move(handler)](Context& c, Respond respond) {
        respond(handler(c));
    };
    return table_.add(std::move(r));
}

Route& Router::add(std::string method, const std::string& pattern, Roles roles,
                   ApiResponse (Router::*handler)(Context&)) {
    return add(std::move(method), pattern, roles,
               Handler([this, handler](Context& c) { return (this->*handler)(c); }));
}

void Router::add(std::string method, const std::string& pattern, Roles roles,
                 void (Router::*handler)(Context&, Respond)) {
    Route r;
    r.method = std::move(method);
    RouteTable::setPattern(r, pattern);
    r.roles = roles;
    r.handler = [this, handler](Context& c, Respond respond) {
        (this->*handler)(c, std::move(respond));
    };
    table_.add(std::move(r));
}

void Router::addStream(std::string method, const std::string& pattern, Roles roles,
                       std::optional<ApiResponse> (Router::*factory)(StreamHandover&),
                       bool sandboxStream) {
    Route r;
    r.sandboxStream = sandboxStream;
    r.method = std::move(method);
    RouteTable::setPattern(r, pattern);
    r.roles = roles;
    r.kind = RouteKind::stream;
    r.stream = [this, factory](StreamHandover& h) { return (this->*factory)(h); };
    table_.add(std::move(r));
}

void Router::setMcp(McpServer& server) {
    mcp_ = &server;
    Route post;
    post.method = "POST";
    RouteTable::setPattern(post, "/mcp");
    post.roles = kAnyRole;
    post.kind = RouteKind::stream;
    post.stream = [this](StreamHandover& h) -> std::optional<ApiResponse> {
        std::make_shared<McpExchange>(std::move(h.stream), std::move(h.buffer), std::move(h.header),
                                      std::move(h.context), *mcp_)
            ->start();
        return std::nullopt;
    };
    table_.add(std::move(post));
    add("DELETE", "/mcp", kAnyRole,
        [this](Context& c) { return mcp_->remove(c.principal, c.request); });
    // No stream of the server's own: the client goes on without one.
    add("GET", "/mcp", kAnyRole, [](Context&) {
        ApiResponse r = errorResponse(405, "method_not_allowed",
                                      "/mcp takes POST and DELETE; this server opens no GET stream");
        r.headers["Allow"] = "POST, DELETE";
        return r;
    });
}

void Router::setE2b(E2bApi& control, E2bEnvd& envd, const e2b::SandboxTokens& tokens) {
    e2bEnvd_ = &envd;
    e2bTokens_ = &tokens;
    control.addRoutes(table_);
    envd.addRoutes(table_);
    // E2B's creates are placed across the fleet as native ones are; the
    // node picked answers in E2B's format.
    control.setPlacer(
        [this](Context& c, const CreateSandboxRequest& request) -> std::optional<ApiResponse> {
            if (!fleet_ || !c.principal.forwardedBy.empty()) return std::nullopt;
            auto answer = placeCreate(c, request, [](const std::string&) {
                return ApiResponse{0, "", ""};
            });
            if (answer.status == 0) return std::nullopt;  // here
            return answer;
        });
    control.setOtherNodesSandboxes([this](Context& c) {
        std::vector<SandboxRecord> out;
        if (!fleet_ || !c.principal.forwardedBy.empty()) return out;
        try {
            for (auto& [node, items] : askOtherNodes(c, "/v1/sandboxes", "sandboxes"))
                for (const auto& item : items)
                    if (auto r = listedSandboxRecord(item)) out.push_back(std::move(*r));
        } catch (const Error& e) {
            logWarn("fleet",
                    std::string("an E2B list has only this node's sandboxes: ") + e.what());
        }
        return out;
    });
}

Router::Selection Router::select(const ApiRequest& head) const {
    Selection s;
    if (e2bEnvd_) {
        if (auto target = e2bEnvd_->target(head)) {
            s.door = target->envd() ? Door::e2b_envd : Door::e2b_port;
            s.sandboxId = target->sandboxId;
        } else if (E2bApi::owns(head.path)) {
            s.door = Door::e2b_control;
        }
    }
    s.match = table_.match(s.door, head.method, head.path);
    return s;
}

Principal Router::callerFor(const ApiRequest& head, Door door, const std::string& sandboxId,
                            std::function<void()>& wake) {
    switch (door) {
        case Door::native:
            // A browser's console session, when no key is sent.
            if (head.authorization.empty())
                if (auto who = sessionCaller(head)) return *who;
            return auth_.principalFor(head.authorization);
        case Door::e2b_control:
            return auth_.principalForE2bKey(head.header("x-api-key"));
        case Door::e2b_envd: {
            // As E2B's proxy: a sandbox that is gone or paused answers 502 first.
            auto sandbox = e2bEnvd_->reachableSandbox(sandboxId);
            const std::string& owner = sandbox.tenant;
            // The token names the key that fetched it; read from the store on
            // every use, so a revoked or expired key's tokens stop at once.
            std::string token = head.header("x-access-token");
            auto keyId = token.empty() && E2bEnvd::isFilesRequest(head)
                             ? std::optional(e2bEnvd_->signedUrlKey(head, sandboxId, owner))
                             : e2bTokens_->envdTokenKey(sandboxId, token);
            std::optional<Principal> who = keyId ? auth_.activeKey(*keyId) : std::nullopt;
            if (!who || (who->role != Role::admin && who->tenant != owner))
                throw Error(ErrorCode::unauthorized,
                            "unauthorized access, please provide a valid access token (a token "
                            "dies with the API key that fetched it)");
            if (E2bEnvd::wakes(sandbox))  // E2B's auto-resume, for a caller with its token
                wake = [envd = e2bEnvd_, sandbox] { envd->awake(sandbox); };
            return *who;
        }
        case Door::e2b_port:
            break;
    }
    throw Error(ErrorCode::unauthorized, "this door takes no key");
}

Router::Admission Router::admit(const ApiRequest& head, const Selection& selection) {
    const Route& route = *selection.route();
    Admission a;
    a.params = selection.match.params;
    if (route.headCheck) route.headCheck(head, a.params);
    // The sandbox doors name their sandbox in a header or the Host: it is the first param.
    bool sandboxDoor = selection.door == Door::e2b_envd || selection.door == Door::e2b_port;
    if (sandboxDoor) a.params.insert(a.params.begin(), selection.sandboxId);
    // A node signs the caller it authenticated into what it forwards; a
    // forged or stale signature is refused here, whatever else is sent.
    std::optional<Principal> forwarded = forwardedCaller(head);
    // A preview's capability and an E2B access token are the owner's to
    // check; any other caller is authenticated before the fleet is asked
    // where its object lives (an anonymous request costs no etcd read).
    bool ownerChecks = route.roles == kPublic || sandboxDoor;
    std::optional<Principal> caller;
    if (!ownerChecks)
        caller =
            forwarded ? *forwarded : callerFor(head, selection.door, selection.sandboxId, a.wake);
    std::optional<RemoteSandbox> remote;
    if (!a.params.empty()) remote = remoteSandbox(a.params[0]);
    if (remote && forwarded)  // one hop only: the record moved meanwhile
        throw Error(ErrorCode::unavailable, a.params[0] +
                                                " is not on this node (the fleet places it on " +
                                                remote->node + "); try again");
    if (remote && ownerChecks) {
        a.forward = forwardTo(*remote, head, std::nullopt);
        return a;
    }
    if (route.roles == kPublic) return a;
    Principal who = caller      ? *caller
                    : forwarded ? *forwarded
                                : callerFor(head, selection.door, selection.sandboxId, a.wake);
    // Another tenant's object does not exist for this key, whatever its
    // role: 404 before 403, so a role check never confirms an id.
    std::optional<std::string> owner;
    if (remote && !remote->tenant.empty())
        owner = remote->tenant;  // else the owning node checks it
    else if (!a.params.empty())
        owner = ownerOf(a.params[0]);
    if (who.role != Role::admin && owner && *owner != who.tenant)
        throw Error(ErrorCode::not_found, "no " + a.params[0]);
    // A node-signed call reaches node rows; a key of any role never does.
    bool nodeCall = (route.roles & kNodeRoute) && !who.forwardedBy.empty();
    if (!nodeCall && !(route.roles & (1u << static_cast<unsigned>(who.role))))
        throw Error(ErrorCode::forbidden, head.method + " " + head.path + " needs an " +
                                              rolesText(route.roles) + " key; this key's role is " +
                                              roleName(who.role));
    // An admin acts on any tenant's object, as its owner would.
    a.tenant = who.role == Role::admin && owner ? *owner : who.tenant;
    // Counted against the caller's own tenant while it runs. A delete is
    // never refused: a tenant at its limit must be able to free things.
    if (head.method != "DELETE") a.slot = limiter_.acquire(who.tenant);
    // Found by asking the other nodes: for a caller authorized and counted
    // here only, never on a node's behalf (one hop).
    if (!remote && !forwarded && fleet_ && !a.params.empty() && !owner &&
        (a.params[0].rfind("apr-", 0) == 0 || a.params[0].rfind("evd-", 0) == 0)) {
        remote = remoteObject(a.params[0]);
        if (remote && !remote->tenant.empty() && who.role != Role::admin &&
            remote->tenant != who.tenant)
            throw Error(ErrorCode::not_found, "no " + a.params[0]);
    }
    if (remote) a.forward = forwardTo(*remote, head, who);
    if (!remote && selection.door == Door::native && !a.params.empty() &&
        a.params[0].rfind("sbx-", 0) == 0 && wakesSandbox(route))
        prepareWake(a);
    a.principal = std::move(who);
    return a;
}

bool Router::wakesSandbox(const Route& route) {
    // The rows that need the guest: they resume a sandbox asleep with
    // auto_resume (its state, deletes, pauses and records never do).
    static const char* kGuestRows[] = {"/exec", "/files", "/fs", "/processes", "/ports"};
    auto label = route.label();
    auto path = label.substr(label.find(' ') + 1);
    for (const char* row : kGuestRows) {
        std::string base = std::string("/v1/sandboxes/{}") + row;
        if (path == base || path.rfind(base + "/", 0) == 0) return true;
    }
    return false;
}

void Router::prepareWake(Admission& a) {
    SandboxRecord r;
    try {
        r = services_.sandboxes.get(a.tenant, a.params[0]);
    } catch (const Error&) {
        return;  // the row answers for it
    }
    if (r.state != SandboxState::paused || !r.autoResume) return;
    // On a worker, before the row: the time it took is the answer's header.
    auto resumed = std::make_shared<std::int64_t>(0);
    a.resumedMs = resumed;
    a.wake = [&sandboxes = services_.sandboxes, tenant = a.tenant, id = a.params[0], resumed] {
        *resumed = sandboxes.wake(tenant, id);
    };
}

std::optional<Principal> Router::forwardedCaller(const ApiRequest& head) {
    if (head.header(fleet::NodeCredential::kAuth).empty() &&
        head.header(fleet::NodeCredential::kCaller).empty() &&
        head.header(fleet::NodeCredential::kFrom).empty())
        return std::nullopt;
    if (!fleet_)
        throw Error(ErrorCode::unauthorized, "node-to-node call refused: this node is in no fleet");
    std::string target = head.path;
    if (!head.target.empty()) target = head.target;
    auto caller = fleet_->credential().verify(head.headers, fleet_->self(), head.method, target,
                                              nowUnixSeconds());
    Principal p;
    p.keyId = caller.keyId;
    p.keyName = caller.keyName;
    p.tenant = caller.tenant;
    p.role = caller.role == "admin"      ? Role::admin
             : caller.role == "approver" ? Role::approver
                                         : Role::agent;
    p.forwardedBy = head.header(fleet::NodeCredential::kFrom);
    return p;
}

std::optional<Router::RemoteSandbox> Router::remoteSandbox(const std::string& id) {
    if (!fleet_) return std::nullopt;
    if (id.rfind("snap-", 0) == 0) return remoteObject(id);
    if (id.rfind("sbx-", 0) != 0) return std::nullopt;
    // Here, unless it is moving away and its new node answers for it now.
    if (services_.sandboxes.ownerOf(id) && !(mover_ && mover_->leaving(id))) return std::nullopt;
    auto placed = fleet_->directory().find(id);
    if (!placed || placed->node == fleet_->self()) return std::nullopt;
    return RemoteSandbox{placed->tenant, placed->node};
}

std::optional<Router::RemoteSandbox> Router::remoteObject(const std::string& id) {
    if (ownerOf(id) || !membership_) return std::nullopt;
    auto nodes = membership_->nodes();
    if (id.rfind("snap-", 0) == 0) {
        // A snapshot lives with its files: the node that lists it holds it.
        for (const auto& n : nodes) {
            const auto& held = n.record.capacity.snapshots;
            if (n.up && n.record.name != fleet_->self() &&
                std::find(held.begin(), held.end(), id) != held.end())
                return RemoteSandbox{"", n.record.name};
        }
        return std::nullopt;
    }
    // An approval lives with its sandbox, a bundle where it was sealed: the
    // fleet's record says where.
    bool bundle = id.rfind("evd-", 0) == 0;
    try {
        if (auto placed = (bundle ? fleet_->evidence() : fleet_->approvals()).find(id))
            return placed->node == fleet_->self()
                       ? std::nullopt
                       : std::optional<RemoteSandbox>(RemoteSandbox{placed->tenant, placed->node});
    } catch (const Error&) {
        // etcd cannot answer: the nodes are asked instead.
    }
    // No record (etcd was down when it was made): the other nodes are asked
    // (approvals and reviews go at a human's pace).
    fleet::ForwardedCaller probe{"node:" + fleet_->self(), "node " + fleet_->self(), "_fleet",
                                 "admin"};
    std::string target = bundle ? "/v1/evidence/" + id + "/info" : "/v1/approvals/" + id;
    for (const auto& n : nodes) {
        if (!n.up || n.record.name == fleet_->self()) continue;
        auto peer = fleet_->peer(n.record.name);
        if (!peer) continue;
        auto headers = fleet_->credential().sign(fleet_->self(), n.record.name, "GET", target,
                                                 probe, nowUnixSeconds());
        auto a = fleet::httpExchange(*peer, "GET", target, headers, {},
                                     std::chrono::steady_clock::now() + std::chrono::seconds(3),
                                     1 << 20);
        if (a.outcome == fleet::HttpOutcome::answered && a.status == 200)
            return RemoteSandbox{"", n.record.name};
    }
    return std::nullopt;
}

Router::Admission::Forward Router::forwardTo(const RemoteSandbox& where, const ApiRequest& head,
                                             const std::optional<Principal>& caller) {
    auto peer = fleet_->peer(where.node);
    Admission::Forward f;
    f.node = where.node;
    if (!peer)
        throw Error(ErrorCode::node_unavailable,
                    "node " + where.node + ", which holds this sandbox, is unavailable");
    f.host = peer->host;
    f.port = peer->port;
    f.tls = peer->tls;
    if (caller) {
        std::string target = head.path;
        if (!head.target.empty()) target = head.target;
        f.headers = fleet_->credential().sign(fleet_->self(), where.node, head.method, target,
                                              carriedCaller(*caller), nowUnixSeconds());
    }
    return f;
}

std::optional<std::string> Router::ownerOf(const std::string& id) {
    if (id.rfind("evd-", 0) == 0) return evidence_ ? evidence_->ownerOf(id) : std::nullopt;
    return services_.sandboxes.ownerOf(id);
}

std::vector<Router::RouteInfo> Router::routeTable() const {
    std::vector<RouteInfo> out;
    for (const auto& r : table_.routes()) {
        std::string label = r.label();
        out.push_back({r.door, r.method, label.substr(label.find(' ') + 1), r.roles,
                       r.kind != RouteKind::unary});
    }
    return out;
}

namespace {
ErrorShape doorShape(Door door, const ApiRequest& head) {
    switch (door) {
        case Door::native:
            return ErrorShape::native;
        case Door::e2b_envd:
            // Connect's RPC paths answer Connect errors; /files and /health, E2B's.
            if (head.path.find('.') != std::string::npos) return ErrorShape::connect;
            return ErrorShape::e2b;
        case Door::e2b_control:
        case Door::e2b_port:
            return ErrorShape::e2b;
    }
    return ErrorShape::native;
}
}  // namespace

ApiResponse Router::errorFor(const Selection& selection, const ApiRequest& request,
                             const ErrorStatus& error) const {
    ErrorShape shape =
        selection.route() ? selection.route()->errors : doorShape(selection.door, request);
    return renderError(shape, error, selection.sandboxId);
}

ApiResponse Router::errorFor(const Selection& selection, const ApiRequest& request,
                             std::exception_ptr error) const {
    return errorFor(selection, request, errorStatusFor(error, request));
}

ApiResponse Router::unrouted(const Selection& selection, const ApiRequest& head) const {
    if (selection.match.pathMatched)
        return errorFor(selection, head,
                        errorStatus(ErrorCode::method_not_allowed,
                                    head.method + " is not allowed on " + head.path));
    return errorFor(
        selection, head,
        errorStatus(ErrorCode::not_found, "no route for " + head.method + " " + head.path));
}

void Router::run(const Route& route, Admission admission, const ApiRequest& request,
                 Respond respond) {
    // Exactly once, whoever answers first: the handler, or the error mapping
    // for what it threw before answering. The tenant's slot is held until then.
    auto answered = std::make_shared<std::atomic<bool>>(false);
    Respond once = [answered, slot = std::move(admission.slot),
                    respond = std::move(respond)](ApiResponse r) {
        if (answered->exchange(true)) return;
        try {
            respond(std::move(r));
        } catch (...) {
        }
    };
    if (admission.resumedMs && *admission.resumedMs > 0)
        once = [once = std::move(once), ms = *admission.resumedMs](ApiResponse r) {
            r.headers["Airlock-Resumed-Ms"] = std::to_string(ms);
            once(std::move(r));
        };
    Context ctx(request, route.door);
    ctx.tenant = std::move(admission.tenant);
    ctx.params = std::move(admission.params);
    ctx.principal = std::move(admission.principal);
    try {
        route.handler(ctx, once);
    } catch (...) {
        if (!answered->load())
            once(renderError(route.errors, errorStatusFor(std::current_exception(), request),
                             ctx.params.empty() ? "" : ctx.params[0]));
    }
}

ConnectStreamPlan Router::plan(const Route& route, Admission& admission,
                               const ApiRequest& request) {
    Context ctx(request, route.door);
    ctx.tenant = admission.tenant;
    ctx.params = admission.params;
    ctx.principal = admission.principal;
    return route.planner(ctx);
}

StreamContext Router::streamContext(Admission admission, ApiRequest head,
                                    std::shared_ptr<void> connectionSlot,
                                    boost::asio::thread_pool& workers) {
    return StreamContext{
        StreamServices{services_.files, services_.ports, services_.commands, services_.gates},
        workers,
        std::move(head),
        std::move(admission.tenant),
        std::move(admission.params),
        std::move(admission.slot),
        std::move(connectionSlot),
        std::move(admission.principal)};
}

Router::Router(FrontDoorServices services, Authenticator& auth, ApiKeys& keys, std::string version,
               std::size_t perTenantLimit)
    : services_(services),
      auth_(auth),
      keys_(keys),
      version_(std::move(version)),
      limiter_(perTenantLimit) {
    // Service, templates, sandboxes and snapshots (RouterSandboxes.cpp).
    add("GET", "/healthz", kPublic, &Router::health);
    add("GET", "/console/**", kPublic, &Router::consoleFile);
    add("POST", "/v1/sessions", kPublic, &Router::createSession).bodyLimit = 4096;
    add("GET", "/v1/sessions/current", kAnyRole, &Router::getSession);
    add("DELETE", "/v1/sessions/current", kAnyRole, &Router::deleteSession);
    addStream("GET", "/v1/events", kAnyRole, &Router::events, false);
    add("GET", "/v1/templates", kAnyRole, &Router::listTemplates);
    // Templates tenants build (RouterTemplates.cpp).
    add("POST", "/v1/templates", kReviewers, &Router::buildTemplate).bodyLimit = kMaxTemplateBody;
    add("GET", "/v1/templates/{}", kAnyRole, &Router::getTemplate);
    add("DELETE", "/v1/templates/{}", kReviewers, &Router::deleteTemplate);
    add("GET", "/v1/templates/{}/builds/{}", kAnyRole, &Router::getTemplateBuild);
    addStream("GET", "/v1/templates/{}/builds/{}/logs", kAnyRole, &Router::templateBuildLogs, false);
    add("POST", "/v1/sandboxes", kDrivers, &Router::createSandbox);
    add("GET", "/v1/sandboxes", kAnyRole, &Router::listSandboxes);
    add("GET", "/v1/sandboxes/{}", kAnyRole, &Router::getSandbox);
    add("GET", "/v1/sandboxes/{}/metrics", kAnyRole, &Router::getSandboxMetrics);
    add("DELETE", "/v1/sandboxes/{}", kDrivers, &Router::deleteSandbox);
    add("POST", "/v1/sandboxes/{}/pause", kDrivers, &Router::pauseSandbox);
    add("POST", "/v1/sandboxes/{}/resume", kDrivers, &Router::resumeSandbox);
    add("POST", "/v1/sandboxes/{}/timeout", kDrivers, &Router::setSandboxTimeout);
    add("PUT", "/v1/sandboxes/{}/network", kDrivers, &Router::setSandboxNetwork);
    add("PUT", "/v1/sandboxes/{}/secrets/{}", kDrivers, &Router::setSandboxSecret);
    add("POST", "/v1/sandboxes/{}/snapshots", kDrivers, &Router::snapshotSandbox);
    add("GET", "/v1/snapshots", kAnyRole, &Router::listSnapshots);
    add("GET", "/v1/snapshots/{}", kAnyRole, &Router::getSnapshot);
    add("DELETE", "/v1/snapshots/{}", kDrivers, &Router::deleteSnapshot);
    // Volumes (RouterVolumes.cpp).
    add("POST", "/v1/volumes", kDrivers, &Router::createVolume);
    add("GET", "/v1/volumes", kAnyRole, &Router::listVolumes);
    add("GET", "/v1/volumes/{}", kAnyRole, &Router::getVolume);
    add("PATCH", "/v1/volumes/{}", kDrivers, &Router::updateVolume);
    add("DELETE", "/v1/volumes/{}", kDrivers, &Router::deleteVolume);
    addStream("GET", "/v1/volumes/{}/files", kDrivers, &Router::getVolumeFile, false);
    addStream("PUT", "/v1/volumes/{}/files", kDrivers, &Router::putVolumeFile, false);
    add("DELETE", "/v1/volumes/{}/files", kDrivers, &Router::deleteVolumeFile);

    // Commands, approvals, package and audit records (RouterExecs.cpp).
    add("POST", "/v1/sandboxes/{}/exec", kDrivers, &Router::execInSandbox);
    add("GET", "/v1/sandboxes/{}/execs/{}", kAnyRole, &Router::getExec);
    add("GET", "/v1/approvals", kReviewers, &Router::listApprovals);
    add("GET", "/v1/approvals/{}", kReviewers, &Router::getApproval);
    add("GET", "/v1/approvals/{}/patch", kReviewers, &Router::getApprovalPatch);
    add("POST", "/v1/approvals/{}", kReviewers, &Router::decideApproval);
    add("GET", "/v1/sandboxes/{}/packages", kAnyRole, &Router::listSandboxPackages);
    add("GET", "/v1/sandboxes/{}/audit", kAnyRole, &Router::listSandboxAudit);

    // Keys, tenants, metrics: admin (RouterKeys.cpp).
    add("POST", "/v1/keys", kAdmins, &Router::createKey);
    add("GET", "/v1/keys", kAdmins, &Router::listKeys);
    add("DELETE", "/v1/keys/{}", kAdmins, &Router::deleteKey);
    add("PUT", "/v1/tenants/{}", kAdmins, &Router::setTenant);
    add("GET", "/v1/tenants/{}", kAdmins, &Router::getTenant);
    add("GET", "/v1/tenants", kAdmins, &Router::listTenants);
    add("GET", "/metrics", kAdmins, &Router::getMetrics);
    add("GET", "/v1/nodes", kAdmins, &Router::listNodes);
    add("POST", "/v1/nodes/{}/drain", kAdmins, &Router::drainNode);
    add("DELETE", "/v1/nodes/{}/drain", kAdmins, &Router::undrainNode);
    add("POST", "/v1/internal/moves", kNodes, &Router::beginArrival);
    add("PUT", "/v1/internal/moves/piece", kNodes, &Router::arrivalPiece).bodyLimit =
        IncomingMoves::kPieceBytes;
    add("POST", "/v1/internal/moves/start", kNodes, &Router::startArrival);
    add("DELETE", "/v1/internal/moves", kNodes, &Router::abortArrival);

    // A tenant's injected secrets (RouterSecrets.cpp).
    add("PUT", "/v1/secrets/{}", kAdmins, &Router::putTenantSecret);
    add("GET", "/v1/secrets", kAnyRole, &Router::listTenantSecrets);
    add("GET", "/v1/secrets/{}", kAnyRole, &Router::getTenantSecret);
    add("DELETE", "/v1/secrets/{}", kAdmins, &Router::deleteTenantSecret);
    add("POST", "/v1/internal/secrets/{}/apply", kNodes, &Router::applyTenantSecretHere);

    // Credentials and repository workspaces (RouterWorkspaces.cpp).
    add("POST", "/v1/credentials", kAdmins, &Router::createCredential);
    add("GET", "/v1/credentials", kAnyRole, &Router::listCredentials);
    add("DELETE", "/v1/credentials/{}", kAdmins, &Router::deleteCredential);
    add("GET", "/v1/sandboxes/{}/workspace", kAnyRole, &Router::getWorkspace);
    add("GET", "/v1/sandboxes/{}/workspace/diff", kAnyRole, &Router::getWorkspaceDiff);
    add("POST", "/v1/sandboxes/{}/workspace/commit", kDrivers, &Router::commitWorkspace);
    add("POST", "/v1/sandboxes/{}/workspace/push", kDrivers, &Router::requestPush);
    add("GET", "/v1/sandboxes/{}/workspace/pushes/{}", kAnyRole, &Router::getPush);
    add("POST", "/v1/sandboxes/{}/workspace/reset", kDrivers, &Router::resetWorkspace);

    // Evidence bundles (RouterEvidence.cpp).
    add("GET", "/v1/evidence/keys", kAnyRole, &Router::listEvidenceKeys);
    add("POST", "/v1/sandboxes/{}/evidence", kDrivers, &Router::sealEvidence);
    add("GET", "/v1/sandboxes/{}/evidence", kAnyRole, &Router::listSandboxEvidence);
    add("GET", "/v1/evidence/{}", kAnyRole, &Router::getEvidence);
    add("GET", "/v1/evidence/{}/info", kAnyRole, &Router::getEvidenceInfo);
    add("POST", "/v1/evidence/{}/review", kReviewers, &Router::reviewEvidence);
    add("GET", "/v1/evidence/{}/review", kAnyRole, &Router::getEvidenceReview);

    // Streaming routes: the connection goes to a session of its own
    // (StreamRoutes.cpp).
    // Approvers too: a human stepping into the terminal, judged by the same
    // policy and audited under the key that typed.
    addStream("GET", "/v1/sandboxes/{}/exec/ws", kAnyRole, &Router::execWebSocket);
    addStream("PUT", "/v1/sandboxes/{}/files", kDrivers, &Router::uploadFile);
    addStream("GET", "/v1/sandboxes/{}/files", kDrivers, &Router::downloadFile);
    addStream("GET", "/v1/sandboxes/{}/processes/{}/logs", kDrivers, &Router::processLogs);
    for (const char* m : {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
        addStream(m, "/preview/{}/{}/{}/**", kPublic, &Router::previewProxy);

    // Guest files, directories, processes and preview ports (RouterGuest.cpp).
    add("GET", "/v1/sandboxes/{}/fs", kDrivers, &Router::listGuestDirectory);
    add("DELETE", "/v1/sandboxes/{}/files", kDrivers, &Router::removeGuestPath);
    add("POST", "/v1/sandboxes/{}/fs/mkdir", kDrivers, &Router::makeGuestDirectory);
    add("POST", "/v1/sandboxes/{}/fs/move", kDrivers, &Router::moveGuestPath);
    add("POST", "/v1/sandboxes/{}/processes", kDrivers, &Router::startProcess);
    add("GET", "/v1/sandboxes/{}/processes", kDrivers, &Router::listProcesses);
    add("GET", "/v1/sandboxes/{}/processes/{}", kDrivers, &Router::getProcess);
    add("POST", "/v1/sandboxes/{}/processes/{}/signal", kDrivers, &Router::signalProcess);
    add("POST", "/v1/sandboxes/{}/processes/{}/stdin", kDrivers, &Router::writeProcessStdin);
    add("POST", "/v1/sandboxes/{}/ports", kDrivers, &Router::exposePort);
    add("GET", "/v1/sandboxes/{}/ports", kDrivers, &Router::listPorts);
    add("DELETE", "/v1/sandboxes/{}/ports/{}", kDrivers, &Router::closePort);
}

void Router::handle(const ApiRequest& request, Respond respond) {
    Selection selection;
    try {
        selection = select(request);
        if (!selection.route()) return respond(unrouted(selection, request));
        const Route& route = *selection.route();
        // The HTTP session serves streaming rows before a request gets here.
        if (route.kind != RouteKind::unary)
            return respond(
                errorFor(selection, request,
                         errorStatus(ErrorCode::bad_request,
                                     request.method + " " + request.path +
                                         " streams: it is served over a connection of its own")));
        auto admission = admit(request, selection);
        if (admission.wake) admission.wake();
        run(route, std::move(admission), request, std::move(respond));
    } catch (...) {
        respond(errorFor(selection, request, std::current_exception()));
    }
}

ApiResponse Router::handle(const ApiRequest& request) {
    struct Result {
        std::mutex mutex;
        std::condition_variable cv;
        std::optional<ApiResponse> response;
    };
    auto result = std::make_shared<Result>();
    handle(request, [result](ApiResponse r) {
        std::lock_guard lock(result->mutex);
        result->response = std::move(r);
        result->cv.notify_all();
    });
    std::unique_lock lock(result->mutex);
    result->cv.wait(lock, [&] { return result->response.has_value(); });
    return std::move(*result->response);
}

}  // namespace airlock::api

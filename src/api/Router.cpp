#include "api/Router.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/E2bApi.hpp"
#include "api/ErrorMapping.hpp"
#include "api/RequestParsing.hpp"
#include "core/JsonFields.hpp"
#include "core/Log.hpp"
#include "evidence/EvidenceService.hpp"
#include "packages/PackageRules.hpp"

namespace airlock::api {
namespace {
using nlohmann::json;

std::string queryValue(const Router::Context& c, const char* key) {
    auto it = c.request.query.find(key);
    if (it == c.request.query.end() || it->second.empty())
        throw Error(ErrorCode::bad_request,
                    std::string("query parameter '") + key + "' is required");
    return it->second;
}

json portJson(const ExposedPort& p, const Router::Context& c, const std::string& publicDomain,
              unsigned listenPort) {
    std::string host = c.request.host.empty() ? "127.0.0.1:8080" : c.request.host;
    if (!publicDomain.empty()) {
        // Its own origin: <token>.<port>-<id>.<domain>, on the listener's port.
        auto colon = host.rfind(':');
        std::string portSuffix = colon != std::string::npos && host.find(']') == std::string::npos
                                     ? host.substr(colon)
                                 : listenPort && listenPort != 80 ? ":" + std::to_string(listenPort)
                                                                  : "";
        return {{"port", p.port},
                {"url", "http://" + p.token + "." + std::to_string(p.port) + "-" + p.sandboxId +
                            "." + publicDomain + portSuffix + "/"},
                {"created_at", p.createdAt}};
    }
    return {{"port", p.port},
            {"url", "http://" + host + "/preview/" + p.sandboxId + "/" + std::to_string(p.port) +
                        "/" + p.token + "/"},
            {"created_at", p.createdAt}};
}

// What every sandbox is held to, as /healthz states it.
json limitsJson(const EnforcedLimits& l) {
    return {{"cpu", l.cpuQuota ? "cgroup quota of vcpus x 100% for the whole QEMU process"
                               : "none (vcpu count only)"},
            {"memory", l.memoryOverheadMib > 0 ? "cgroup hard limit: guest memory_mib + " +
                                                     std::to_string(l.memoryOverheadMib) + " MiB"
                                               : "none"},
            {"disk",
             "qcow2 overlay bounded by the sandbox's disk_gib (its virtual size; the guest sees "
             "ENOSPC); "
             "a create needs its whole disk free above min_free_disk_mib"},
            {"disk_io", l.diskBytesPerSecond || l.diskOpsPerSecond
                            ? json{{"bytes_per_second", l.diskBytesPerSecond},
                                   {"ops_per_second", l.diskOpsPerSecond}}
                            : json("none")},
            {"min_free_disk_mib", l.minFreeDiskMib},
            {"qemu_uid", l.ownUidPerSandbox ? "one uid per sandbox" : "shared QEMU user"},
            {"host_memory",
             {{"tcg_cache_mib", l.tcgCacheMib},
              {"free_page_reporting", l.freePageReporting},
              {"kernel_samepage_merging", l.memorySharing}}}};
}

// What a listing covers: the caller's tenant, or for an admin every tenant.
TenantScope scopeOf(const Router::Context& c) {
    return c.admin() ? TenantScope::all() : TenantScope::only(c.tenant);
}
}  // namespace

std::vector<std::string> splitPath(const std::string& path) {
    std::vector<std::string> out;
    std::size_t i = 0;
    while (i < path.size()) {
        while (i < path.size() && path[i] == '/') ++i;
        std::size_t j = path.find('/', i);
        if (j == std::string::npos) j = path.size();
        if (j > i) out.push_back(path.substr(i, j - i));
        i = j;
    }
    return out;
}

void Router::add(std::string method, const std::string& pattern, Roles roles, Handler handler) {
    addAsync(std::move(method), pattern, roles,
             [handler = std::move(handler)](Context& c, Respond respond) { respond(handler(c)); });
}

void Router::addAsync(std::string method, const std::string& pattern, Roles roles,
                      AsyncHandler handler) {
    routes_.push_back(
        Route{std::move(method), splitPath(pattern), roles, std::move(handler), nullptr, false});
}

void Router::addStream(std::string method, const std::string& pattern, Roles roles,
                       StreamFactory factory) {
    bool prefix = pattern.size() > 3 && pattern.substr(pattern.size() - 3) == "/**";
    std::string p = prefix ? pattern.substr(0, pattern.size() - 3) : pattern;
    routes_.push_back(
        Route{std::move(method), splitPath(p), roles, nullptr, std::move(factory), prefix});
}

namespace {
std::string rolesText(Router::Roles roles) {
    std::string out;
    for (Role r : {Role::agent, Role::approver, Role::admin})
        if (roles & (1u << static_cast<unsigned>(r)))
            out += (out.empty() ? "" : " or ") + roleName(r);
    return out;
}
std::string joinPattern(const std::vector<std::string>& pattern) {
    std::string out;
    for (const auto& s : pattern) out += "/" + s;
    return out.empty() ? "/" : out;
}
}  // namespace

std::pair<Principal, std::string> Router::authorize(const ApiRequest& request, Roles roles,
                                                    const std::vector<std::string>& params) {
    Principal who = auth_.principalFor(request.authorization);
    // Another tenant's object does not exist for this key, whatever its
    // role: 404 before 403, so a role check never confirms an id.
    if (who.role != Role::admin && !params.empty()) {
        auto owner = ownerOf(params[0]);
        if (owner && *owner != who.tenant) throw Error(ErrorCode::not_found, "no " + params[0]);
    }
    if (!(roles & (1u << static_cast<unsigned>(who.role))))
        throw Error(ErrorCode::forbidden, request.method + " " + request.path + " needs an " +
                                              rolesText(roles) + " key; this key's role is " +
                                              roleName(who.role));
    std::string tenant = who.tenant;
    // An admin acts on any tenant's object, as its owner would.
    if (who.role == Role::admin && !params.empty())
        if (auto owner = ownerOf(params[0])) tenant = *owner;
    return {std::move(who), std::move(tenant)};
}

std::optional<std::string> Router::ownerOf(const std::string& id) {
    if (id.rfind("evd-", 0) == 0) return evidence_ ? evidence_->ownerOf(id) : std::nullopt;
    return controller_.ownerOf(id);
}

std::vector<Router::RouteInfo> Router::routeTable() const {
    std::vector<RouteInfo> out;
    for (const auto& r : routes_)
        out.push_back({r.method, joinPattern(r.pattern) + (r.prefix ? "/**" : ""), r.roles,
                       r.stream != nullptr});
    return out;
}

bool Router::matchPattern(const std::vector<std::string>& pattern,
                          const std::vector<std::string>& segments,
                          std::vector<std::string>& params, bool prefix) {
    if (prefix ? segments.size() < pattern.size() : segments.size() != pattern.size()) return false;
    params.clear();
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] == "{}")
            params.push_back(segments[i]);
        else if (pattern[i] != segments[i])
            return false;
    }
    return true;
}

Router::StreamMatch Router::matchStream(const std::string& method, const std::string& path) const {
    auto segments = splitPath(path);
    for (const auto& r : routes_) {
        std::vector<std::string> params;
        if (r.stream && r.method == method && matchPattern(r.pattern, segments, params, r.prefix))
            return StreamMatch{&r.stream, r.roles, std::move(params)};
    }
    return {};
}

Router::Router(SandboxController& controller, Authenticator& auth, ApiKeyStore& keys,
               std::string version, std::size_t perTenantLimit)
    : controller_(controller),
      auth_(auth),
      keys_(keys),
      version_(std::move(version)),
      limiter_(perTenantLimit) {
    add("GET", "/healthz", kPublic, [this](Context&) {
        return jsonResponse(
            200,
            {{"status", "ok"},
             {"accel", accelName(controller_.accel())},
             {"agent_transport",
              controller_.transport() == AgentTransportKind::vsock ? "vsock" : "virtio-serial"},
             {"version", version_},
             {"templates", controller_.templates().list().size()},
             {"limits", limitsJson(controller_.enforcedLimits())}});
    });
    add("GET", "/v1/templates", kAnyRole, [this](Context&) {
        json list = json::array();
        for (const auto& t : controller_.templates().list())
            list.push_back({{"name", t.name},
                            {"vcpus", t.vcpus},
                            {"memory_mib", t.memoryMib},
                            {"digest", t.digest},
                            {"kernel_version", t.kernelVersion},
                            {"has_disk", !t.diskPath.empty()},
                            {"warm", controller_.hasWarmSnapshot(t.name)}});
        return jsonResponse(200, {{"templates", list}});
    });
    add("POST", "/v1/sandboxes", kDrivers, [this](Context& c) {
        auto request = parseCreateSandbox(c.request.body);
        // The agent never loosens its own package rules (a dry run among them).
        request.packagesTightenOnly = c.principal.role == Role::agent;
        if (request.workspace)
            return jsonResponse(201, sandboxJson(workspaces().createSandbox(c.tenant, request)));
        return jsonResponse(201, sandboxJson(controller_.create(c.tenant, request)));
    });
    add("GET", "/v1/sandboxes", kAnyRole, [this](Context& c) {
        json list = json::array();
        // An admin sees every tenant's, each naming its tenant.
        for (const auto& r : controller_.list(scopeOf(c))) {
            list.push_back(sandboxJson(r));
            if (c.admin()) list.back()["tenant"] = r.tenant;
        }
        return jsonResponse(200, {{"sandboxes", list}});
    });
    add("GET", "/v1/sandboxes/{}", kAnyRole, [this](Context& c) {
        return jsonResponse(200, sandboxJson(controller_.get(c.tenant, c.params[0])));
    });
    add("DELETE", "/v1/sandboxes/{}", kDrivers, [this](Context& c) {
        controller_.destroy(c.tenant, c.params[0]);
        return ApiResponse{204, "", ""};
    });
    add("POST", "/v1/sandboxes/{}/pause", kDrivers, [this](Context& c) {
        parseEmptyBody(c.request.body, "pause request");
        return jsonResponse(200, sandboxJson(controller_.pause(c.tenant, c.params[0])));
    });
    add("POST", "/v1/sandboxes/{}/resume", kDrivers, [this](Context& c) {
        parseEmptyBody(c.request.body, "resume request");
        return jsonResponse(200, sandboxJson(controller_.resume(c.tenant, c.params[0])));
    });
    add("POST", "/v1/sandboxes/{}/timeout", kDrivers, [this](Context& c) {
        controller_.get(c.tenant, c.params[0]);
        auto timeout = parseTimeoutUpdate(c.request.body);
        return jsonResponse(200,
                            sandboxJson(controller_.setTimeout(c.tenant, c.params[0], timeout)));
    });
    add("PUT", "/v1/sandboxes/{}/network", kDrivers, [this](Context& c) {
        controller_.get(c.tenant, c.params[0]);
        auto allow = parseNetworkUpdate(c.request.body);
        return jsonResponse(200, sandboxJson(controller_.setNetwork(c.tenant, c.params[0], allow)));
    });
    add("POST", "/v1/sandboxes/{}/snapshots", kDrivers, [this](Context& c) {
        controller_.get(c.tenant, c.params[0]);
        parseEmptyBody(c.request.body, "snapshot request");
        return jsonResponse(201, snapshotJson(controller_.snapshot(c.tenant, c.params[0])));
    });
    add("GET", "/v1/snapshots", kAnyRole, [this](Context& c) {
        json list = json::array();
        for (const auto& s : controller_.listSnapshots(scopeOf(c))) {
            list.push_back(snapshotJson(s));
            if (c.admin()) list.back()["tenant"] = s.tenant;
        }
        return jsonResponse(200, {{"snapshots", list}});
    });
    add("GET", "/v1/snapshots/{}", kAnyRole, [this](Context& c) {
        return jsonResponse(200, snapshotJson(controller_.getSnapshot(c.tenant, c.params[0])));
    });
    add("DELETE", "/v1/snapshots/{}", kDrivers, [this](Context& c) {
        controller_.deleteSnapshot(c.tenant, c.params[0]);
        return ApiResponse{204, "", ""};
    });
    addAsync("POST", "/v1/sandboxes/{}/exec", kDrivers, [this](Context& c, Respond respond) {
        // Existence first: a missing sandbox is 404 whatever the body says.
        controller_.get(c.tenant, c.params[0]);
        auto options = parseExec(c.request.body);
        // No thread waits for the command: its end answers the request.
        ApiRequest label{c.request.method, c.request.path, {}, {}, {}, {}, {}, {}};
        auto pending = controller_.submitExecAsync(
            c.tenant, c.params[0], options,
            [respond, label](std::optional<ExecOutput> out, std::exception_ptr error) {
                if (out) return respond(jsonResponse(200, execOutputJson(*out)));
                respond(responseFor(error, label));
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
    });
    add("GET", "/v1/sandboxes/{}/execs/{}", kAnyRole, [this](Context& c) {
        return jsonResponse(200,
                            gatedExecJson(controller_.getExec(c.tenant, c.params[0], c.params[1])));
    });
    add("GET", "/v1/approvals", kReviewers, [this](Context& c) {
        json list = json::array();
        for (const auto& g : controller_.pendingApprovals(scopeOf(c))) {
            auto j = gatedExecJson(g);
            list.push_back({{"id", g.approvalId},
                            {"exec_id", g.id},
                            {"sandbox", g.sandboxId},
                            {"command", g.command},
                            {"class", g.commandClass},
                            {"reason", g.reason},
                            {"requested_at", g.requestedAt},
                            {"expires_at", j["expires_at"]}});
            if (c.admin()) list.back()["tenant"] = g.tenant;
        }
        return jsonResponse(200, {{"approvals", list}});
    });
    addAsync("POST", "/v1/approvals/{}", kReviewers, [this](Context& c, Respond respond) {
        auto decision = parseApprovalDecision(c.request.body);
        // The deciding key by id and name, not just its tenant.
        auto g =
            controller_.decideApproval(c.tenant, c.params[0], decision.approve, decision.reason,
                                       "key:" + c.principal.keyId + " (" + c.principal.keyName +
                                           ", " + roleName(c.principal.role) + ")");
        if (g.state != "running") return respond(jsonResponse(200, gatedExecJson(g)));
        // An approved command is answered with its outcome when it ends
        // within a bounded wait (else with its state then: GET the exec
        // later). No thread waits: the controller's timer looks again.
        controller_.awaitGated(g.id, std::chrono::seconds(120), [respond](GatedExec now) {
            respond(jsonResponse(200, gatedExecJson(now)));
        });
    });
    add("GET", "/v1/sandboxes/{}/packages", kAnyRole, [this](Context& c) {
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
        for (const auto& e : controller_.audit(c.tenant, c.params[0], q)) {
            auto data = json::parse(e.dataJson, nullptr, false);
            if (!data.is_object()) continue;
            if (!ecosystem.empty() && data.value("ecosystem", "") != ecosystem) continue;
            if (!decision.empty() && data.value("decision", "") != decision) continue;
            json item{{"seq", e.seq}, {"at", e.at}, {"type", e.type}};
            item.update(data);
            list.push_back(std::move(item));
        }
        return jsonResponse(200, {{"packages", list}});
    });
    add("GET", "/v1/sandboxes/{}/audit", kAnyRole, [this](Context& c) {
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
        for (const auto& e : controller_.audit(c.tenant, c.params[0], q)) {
            events.push_back(auditEventJson(e));
            last = e.seq;
        }
        json out{{"events", events}};
        if (static_cast<int>(events.size()) == q.limit) out["next_after"] = last;
        return jsonResponse(200, out);
    });

    addKeyRoutes();
    addWorkspaceRoutes();
    addEvidenceRoutes();

    addStreamRoutes();

    // Files and directories (paths are resolved inside the guest).
    add("GET", "/v1/sandboxes/{}/fs", kDrivers, [this](Context& c) {
        json r{{"action", "list"}, {"path", queryValue(c, "path")}};
        return jsonResponse(200, controller_.fileOp(c.tenant, c.params[0], r));
    });
    add("DELETE", "/v1/sandboxes/{}/files", kDrivers, [this](Context& c) {
        std::string recursive =
            c.request.query.count("recursive") ? c.request.query.at("recursive") : "";
        json r{{"action", "remove"},
               {"path", queryValue(c, "path")},
               {"recursive", recursive == "1" || recursive == "true"}};
        controller_.fileOp(c.tenant, c.params[0], r);
        return ApiResponse{204, "", ""};
    });
    add("POST", "/v1/sandboxes/{}/fs/mkdir", kDrivers, [this](Context& c) {
        json body = parseJsonBody(c.request.body);
        rejectUnknownFields(body, {"path"}, "mkdir request");
        json r{{"action", "mkdir"}, {"path", stringField(body, "path")}};
        return jsonResponse(201, controller_.fileOp(c.tenant, c.params[0], r));
    });
    add("POST", "/v1/sandboxes/{}/fs/move", kDrivers, [this](Context& c) {
        json body = parseJsonBody(c.request.body);
        rejectUnknownFields(body, {"from", "to"}, "move request");
        json r{{"action", "move"},
               {"path", stringField(body, "from")},
               {"to", stringField(body, "to")}};
        if (r["to"].get<std::string>().empty() || r["to"].get<std::string>()[0] != '/')
            throw Error(ErrorCode::bad_request, "'to' must be an absolute path");
        return jsonResponse(200, controller_.fileOp(c.tenant, c.params[0], r));
    });

    // Background processes.
    add("POST", "/v1/sandboxes/{}/processes", kDrivers, [this](Context& c) {
        controller_.get(c.tenant, c.params[0]);
        auto request = parseProcessStart(c.request.body);
        return jsonResponse(201, controller_.processOp(c.tenant, c.params[0], request));
    });
    add("GET", "/v1/sandboxes/{}/processes", kDrivers, [this](Context& c) {
        return jsonResponse(200,
                            controller_.processOp(c.tenant, c.params[0], {{"op", "process_list"}}));
    });
    add("GET", "/v1/sandboxes/{}/processes/{}", kDrivers, [this](Context& c) {
        return jsonResponse(200,
                            controller_.processOp(c.tenant, c.params[0],
                                                  {{"op", "process_get"}, {"id", c.params[1]}}));
    });
    add("POST", "/v1/sandboxes/{}/processes/{}/signal", kDrivers, [this](Context& c) {
        json body = parseJsonBody(c.request.body);
        rejectUnknownFields(body, {"signal"}, "signal request");
        std::string sig = body.contains("signal") ? stringField(body, "signal") : "TERM";
        return jsonResponse(200,
                            controller_.processOp(
                                c.tenant, c.params[0],
                                {{"op", "process_signal"}, {"id", c.params[1]}, {"signal", sig}}));
    });
    add("POST", "/v1/sandboxes/{}/processes/{}/stdin", kDrivers, [this](Context& c) {
        json body = parseJsonBody(c.request.body);
        rejectUnknownFields(body, {"data", "eof"}, "stdin request");
        json r{{"op", "process_stdin"}, {"id", c.params[1]}};
        if (body.contains("data")) r["data"] = stringField(body, "data");
        if (body.contains("eof")) {
            if (!body["eof"].is_boolean())
                throw Error(ErrorCode::bad_request, "'eof' must be a boolean");
            r["eof"] = body["eof"];
        }
        return jsonResponse(200, controller_.processOp(c.tenant, c.params[0], r));
    });

    // Preview ports.
    add("POST", "/v1/sandboxes/{}/ports", kDrivers, [this](Context& c) {
        json body = parseJsonBody(c.request.body);
        rejectUnknownFields(body, {"port"}, "port request");
        if (!body.contains("port") || !body["port"].is_number_integer())
            throw Error(ErrorCode::bad_request, "'port' must be an integer");
        auto p = body["port"].get<std::int64_t>();
        if (p < 1 || p > 65535) throw Error(ErrorCode::bad_request, "'port' must be 1-65535");
        return jsonResponse(
            201, portJson(controller_.exposePort(c.tenant, c.params[0], static_cast<unsigned>(p)),
                          c, publicDomain_, listenPort_));
    });
    add("GET", "/v1/sandboxes/{}/ports", kDrivers, [this](Context& c) {
        json list = json::array();
        for (const auto& p : controller_.listPorts(c.tenant, c.params[0]))
            list.push_back(portJson(p, c, publicDomain_, listenPort_));
        return jsonResponse(200, {{"ports", list}});
    });
    add("DELETE", "/v1/sandboxes/{}/ports/{}", kDrivers, [this](Context& c) {
        unsigned port = 0;
        try {
            port = static_cast<unsigned>(std::stoul(c.params[1]));
        } catch (...) {
            throw Error(ErrorCode::bad_request, "bad port");
        }
        controller_.closePort(c.tenant, c.params[0], port);
        return ApiResponse{204, "", ""};
    });
}

void Router::dispatch(const ApiRequest& request, Respond& respond) {
    auto segments = splitPath(request.path);
    bool pathMatched = false;
    for (const auto& route : routes_) {
        std::vector<std::string> params;
        if (!matchPattern(route.pattern, segments, params, route.prefix)) continue;
        pathMatched = true;
        if (route.method != request.method) continue;
        // The HTTP session serves streaming routes before a request gets here.
        if (route.stream)
            return respond(errorResponse(
                ErrorCode::bad_request, request.method + " " + request.path +
                                            " streams: it is served over a connection of its own"));
        Context ctx{request, {}, std::move(params), {}};
        if (route.roles != kPublic)
            std::tie(ctx.principal, ctx.tenant) = authorize(request, route.roles, ctx.params);
        // Held until the answer is sent, however long that takes. A delete
        // is never refused: a tenant at its limit must be able to free things.
        // Counted against the caller's own tenant.
        if (route.roles != kPublic && request.method != "DELETE") {
            auto slot = limiter_.acquire(ctx.principal.tenant);
            respond = [slot, inner = std::move(respond)](ApiResponse r) { inner(std::move(r)); };
        }
        return route.handler(ctx, respond);
    }
    if (pathMatched)
        return respond(errorResponse(405, "method_not_allowed",
                                     request.method + " is not allowed on " + request.path));
    respond(
        errorResponse(ErrorCode::not_found, "no route for " + request.method + " " + request.path));
}

ApiResponse Router::responseFor(std::exception_ptr error, const ApiRequest& request) {
    try {
        std::rethrow_exception(error);
    } catch (const Error& e) {
        if (httpStatusFor(e.code()) >= 500)
            logWarn("api", request.method + " " + request.path + ": " + e.what());
        return errorResponse(e.code(), e.what());
    } catch (const std::exception& e) {
        logError("api", request.method + " " + request.path + ": unexpected " + e.what());
    } catch (...) {
        logError("api", request.method + " " + request.path + ": unexpected exception");
    }
    return errorResponse(ErrorCode::internal, "internal error");
}

void Router::handle(const ApiRequest& request, Respond respond) {
    // Exactly once, whoever answers first: the handler, or the error mapping
    // for what it threw before answering.
    auto answered = std::make_shared<std::atomic<bool>>(false);
    Respond once = [answered, respond = std::move(respond)](ApiResponse r) {
        if (answered->exchange(true)) return;
        try {
            respond(std::move(r));
        } catch (...) {
        }
    };
    try {
        if (e2bApi_ && E2bApi::owns(request.path)) return once(e2bApi_->handle(request));
        dispatch(request, once);
    } catch (...) {
        if (!answered->load()) once(responseFor(std::current_exception(), request));
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

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

void Router::add(std::string method, const std::string& pattern, Roles roles,
                 ApiResponse (Router::*handler)(Context&)) {
    add(std::move(method), pattern, roles,
        [this, handler](Context& c) { return (this->*handler)(c); });
}

void Router::add(std::string method, const std::string& pattern, Roles roles,
                 void (Router::*handler)(Context&, Respond)) {
    addAsync(std::move(method), pattern, roles, [this, handler](Context& c, Respond respond) {
        (this->*handler)(c, std::move(respond));
    });
}

void Router::addStream(std::string method, const std::string& pattern, Roles roles,
                       std::optional<ApiResponse> (Router::*factory)(StreamHandover&)) {
    addStream(std::move(method), pattern, roles,
              StreamFactory([this, factory](StreamHandover& h) { return (this->*factory)(h); }));
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
    // Service, templates, sandboxes and snapshots (RouterSandboxes.cpp).
    add("GET", "/healthz", kPublic, &Router::health);
    add("GET", "/v1/templates", kAnyRole, &Router::listTemplates);
    add("POST", "/v1/sandboxes", kDrivers, &Router::createSandbox);
    add("GET", "/v1/sandboxes", kAnyRole, &Router::listSandboxes);
    add("GET", "/v1/sandboxes/{}", kAnyRole, &Router::getSandbox);
    add("DELETE", "/v1/sandboxes/{}", kDrivers, &Router::deleteSandbox);
    add("POST", "/v1/sandboxes/{}/pause", kDrivers, &Router::pauseSandbox);
    add("POST", "/v1/sandboxes/{}/resume", kDrivers, &Router::resumeSandbox);
    add("POST", "/v1/sandboxes/{}/timeout", kDrivers, &Router::setSandboxTimeout);
    add("PUT", "/v1/sandboxes/{}/network", kDrivers, &Router::setSandboxNetwork);
    add("POST", "/v1/sandboxes/{}/snapshots", kDrivers, &Router::snapshotSandbox);
    add("GET", "/v1/snapshots", kAnyRole, &Router::listSnapshots);
    add("GET", "/v1/snapshots/{}", kAnyRole, &Router::getSnapshot);
    add("DELETE", "/v1/snapshots/{}", kDrivers, &Router::deleteSnapshot);

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
    addStream("GET", "/v1/sandboxes/{}/exec/ws", kDrivers, &Router::execWebSocket);
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

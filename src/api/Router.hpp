#pragma once
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "api/Authenticator.hpp"
#include "api/HttpTypes.hpp"
#include "api/StreamContext.hpp"
#include "api/TenantLimiter.hpp"
#include "controller/SandboxController.hpp"
#include "store/TenantScope.hpp"
#include "workspace/WorkspaceService.hpp"

namespace airlock {
class EvidenceService;
}

namespace airlock::api {

class E2bApi;
class E2bEnvd;

// The single route table. Each handler parses its request into a controller
// call and maps the result back to JSON; errors are mapped in one place
// (ErrorMapping) by handle().
class Router {
  public:
    // The roles a route accepts (a bit per Role); kPublic: no key at all.
    using Roles = unsigned;
    static constexpr Roles kPublic = 0;
    static constexpr Roles kAgent = 1u << static_cast<unsigned>(Role::agent);
    static constexpr Roles kApprover = 1u << static_cast<unsigned>(Role::approver);
    static constexpr Roles kAdmin = 1u << static_cast<unsigned>(Role::admin);
    static constexpr Roles kDrivers = kAgent | kAdmin;       // run and change things
    static constexpr Roles kReviewers = kApprover | kAdmin;  // decide approvals
    static constexpr Roles kAnyRole = kAgent | kApprover | kAdmin;
    static constexpr Roles kAdmins = kAdmin;

    struct Context {
        const ApiRequest& request;
        // The tenant whose objects the call acts on: the key's own, or for an
        // admin key the owner of the object its path names. Empty for
        // unauthenticated routes.
        std::string tenant;
        std::vector<std::string> params;  // the {…} segments of the path, in order
        Principal principal;              // who calls (authenticated routes)
        bool admin() const { return principal.role == Role::admin; }
        // What a listing covers: the caller's tenant, or for an admin every tenant.
        TenantScope scope() const {
            return admin() ? TenantScope::all() : TenantScope::only(tenant);
        }
    };
    using Handler = std::function<ApiResponse(Context&)>;
    // Routes whose work outlives the call (a command runs for an hour): the
    // handler returns at once and calls `respond` later, exactly once, from
    // any thread. Errors thrown before it returns are mapped as usual.
    using Respond = std::function<void(ApiResponse)>;
    using AsyncHandler = std::function<void(Context&, Respond)>;

    Router(SandboxController& controller, Authenticator& auth, ApiKeyStore& keys,
           std::string version, std::size_t perTenantLimit = 256);

    // Never throws; `respond` is called exactly once (maybe on another thread).
    void handle(const ApiRequest& request, Respond respond);
    // The blocking form (tests).
    ApiResponse handle(const ApiRequest& request);
    // The response for an exception (the one error mapping).
    static ApiResponse responseFor(std::exception_ptr error, const ApiRequest& request);

    TenantLimiter& limiter() { return limiter_; }
    // Repository workspaces (without: their routes answer 503).
    void setWorkspaces(workspace::WorkspaceService* w) { workspaces_ = w; }
    // Evidence bundles (without: their routes answer 503).
    void setEvidence(EvidenceService* e) { evidence_ = e; }
    // The E2B front door: its control plane (/sandboxes, /v2/sandboxes)
    // answers through here; envd requests are the HTTP session's.
    void setE2b(E2bApi* control, E2bEnvd* envd) {
        e2bApi_ = control;
        e2bEnvd_ = envd;
    }
    E2bEnvd* e2bEnvd() { return e2bEnvd_; }
    // --public-domain: previews get their own origin (<token>.<port>-<id>.D)
    // and the /preview/ path form on the API's origin is closed.
    // listenPort: the URL's port when a request's Host names none.
    void setPublicDomain(std::string domain, unsigned listenPort) {
        publicDomain_ = std::move(domain);
        listenPort_ = listenPort;
    }
    const std::string& publicDomain() const { return publicDomain_; }

    // Routes whose bodies stream: the HTTP session authorizes the caller,
    // then hands the connection to the route's factory.
    struct StreamMatch {
        const StreamFactory* factory = nullptr;  // none: not a streaming route
        Roles roles = kDrivers;
        std::vector<std::string> params;
    };
    StreamMatch matchStream(const std::string& method, const std::string& path) const;
    // The caller of a route that accepts `roles`, and the tenant it acts on
    // (see Context::tenant). Throws Error(unauthorized) for a bad key and
    // Error(forbidden) for a role the route does not accept.
    std::pair<Principal, std::string> authorize(const ApiRequest& request, Roles roles,
                                                const std::vector<std::string>& params);
    // Every route with the roles it accepts ("GET /v1/sandboxes/{}": kAnyRole),
    // for docs and the route-walking tests.
    struct RouteInfo {
        std::string method, pattern;
        Roles roles;
        bool stream;
    };
    std::vector<RouteInfo> routeTable() const;
    // GET /metrics's body (also served without a key on --metrics-listen).
    std::string metricsText();

  private:
    // One entry of the table: a JSON handler, or a stream factory.
    struct Route {
        std::string method;
        std::vector<std::string> pattern;  // "{}" matches one segment
        Roles roles;
        AsyncHandler handler;
        StreamFactory stream;
        bool prefix = false;  // the pattern matches the start of the path (previews)
    };
    void add(std::string method, const std::string& pattern, Roles roles, Handler handler);
    void add(std::string method, const std::string& pattern, Roles roles,
             ApiResponse (Router::*handler)(Context&));
    void add(std::string method, const std::string& pattern, Roles roles,
             void (Router::*handler)(Context&, Respond));
    void addAsync(std::string method, const std::string& pattern, Roles roles,
                  AsyncHandler handler);
    // A pattern ending in "/**" matches every path below it.
    void addStream(std::string method, const std::string& pattern, Roles roles,
                   StreamFactory factory);
    void addStream(std::string method, const std::string& pattern, Roles roles,
                   std::optional<ApiResponse> (Router::*factory)(StreamHandover&));

    // The handlers, by resource; each file holds one group.
    // Service, templates, sandboxes and snapshots (RouterSandboxes.cpp).
    ApiResponse health(Context& c);
    ApiResponse listTemplates(Context& c);
    ApiResponse createSandbox(Context& c);
    ApiResponse listSandboxes(Context& c);
    ApiResponse getSandbox(Context& c);
    ApiResponse deleteSandbox(Context& c);
    ApiResponse pauseSandbox(Context& c);
    ApiResponse resumeSandbox(Context& c);
    ApiResponse setSandboxTimeout(Context& c);
    ApiResponse setSandboxNetwork(Context& c);
    ApiResponse snapshotSandbox(Context& c);
    ApiResponse listSnapshots(Context& c);
    ApiResponse getSnapshot(Context& c);
    ApiResponse deleteSnapshot(Context& c);
    // Commands, approvals, package and audit records (RouterExecs.cpp).
    void execInSandbox(Context& c, Respond respond);
    ApiResponse getExec(Context& c);
    ApiResponse listApprovals(Context& c);
    ApiResponse getApproval(Context& c);
    ApiResponse getApprovalPatch(Context& c);  // RouterWorkspaces.cpp
    void decideApproval(Context& c, Respond respond);
    ApiResponse listSandboxPackages(Context& c);
    ApiResponse listSandboxAudit(Context& c);
    // Keys, tenants, metrics: admin (RouterKeys.cpp).
    ApiResponse createKey(Context& c);
    ApiResponse listKeys(Context& c);
    ApiResponse deleteKey(Context& c);
    ApiResponse setTenant(Context& c);
    ApiResponse getTenant(Context& c);
    ApiResponse listTenants(Context& c);
    ApiResponse getMetrics(Context& c);
    // Credentials and repository workspaces (RouterWorkspaces.cpp).
    ApiResponse createCredential(Context& c);
    ApiResponse listCredentials(Context& c);
    ApiResponse deleteCredential(Context& c);
    ApiResponse getWorkspace(Context& c);
    ApiResponse getWorkspaceDiff(Context& c);
    ApiResponse commitWorkspace(Context& c);
    ApiResponse requestPush(Context& c);
    ApiResponse getPush(Context& c);
    ApiResponse resetWorkspace(Context& c);
    // Evidence bundles (RouterEvidence.cpp).
    ApiResponse listEvidenceKeys(Context& c);
    ApiResponse sealEvidence(Context& c);
    ApiResponse listSandboxEvidence(Context& c);
    ApiResponse getEvidence(Context& c);
    ApiResponse getEvidenceInfo(Context& c);
    ApiResponse reviewEvidence(Context& c);
    ApiResponse getEvidenceReview(Context& c);
    // Guest files, directories, processes and preview ports (RouterGuest.cpp).
    ApiResponse listGuestDirectory(Context& c);
    ApiResponse removeGuestPath(Context& c);
    ApiResponse makeGuestDirectory(Context& c);
    ApiResponse moveGuestPath(Context& c);
    ApiResponse startProcess(Context& c);
    ApiResponse listProcesses(Context& c);
    ApiResponse getProcess(Context& c);
    ApiResponse signalProcess(Context& c);
    ApiResponse writeProcessStdin(Context& c);
    ApiResponse exposePort(Context& c);
    ApiResponse listPorts(Context& c);
    ApiResponse closePort(Context& c);
    std::optional<ApiResponse> execWebSocket(StreamHandover& h);
    std::optional<ApiResponse> uploadFile(StreamHandover& h);
    std::optional<ApiResponse> downloadFile(StreamHandover& h);
    std::optional<ApiResponse> processLogs(StreamHandover& h);
    std::optional<ApiResponse> previewProxy(StreamHandover& h);

    workspace::WorkspaceService& workspaces();
    EvidenceService& evidence();
    std::optional<std::string> ownerOf(const std::string& id);
    static bool matchPattern(const std::vector<std::string>& pattern,
                             const std::vector<std::string>& segments,
                             std::vector<std::string>& params, bool prefix = false);
    void dispatch(const ApiRequest& request, Respond& respond);

    SandboxController& controller_;
    Authenticator& auth_;
    ApiKeyStore& keys_;
    std::string version_;
    std::vector<Route> routes_;
    TenantLimiter limiter_;
    workspace::WorkspaceService* workspaces_ = nullptr;
    EvidenceService* evidence_ = nullptr;
    E2bApi* e2bApi_ = nullptr;
    E2bEnvd* e2bEnvd_ = nullptr;
    std::string publicDomain_;
    unsigned listenPort_ = 0;
};

std::vector<std::string> splitPath(const std::string& path);

}  // namespace airlock::api

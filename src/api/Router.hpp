#pragma once
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/ConsoleAssets.hpp"
#include "api/EventFeed.hpp"
#include "api/WebSessions.hpp"
#include "api/Authenticator.hpp"
#include "api/ErrorMapping.hpp"
#include "api/HttpTypes.hpp"
#include "api/RouteTable.hpp"
#include "api/StreamContext.hpp"
#include "api/TenantLimiter.hpp"
#include "controller/FrontDoorServices.hpp"
#include "store/TenantScope.hpp"
#include "workspace/WorkspaceService.hpp"

namespace boost::asio::ssl {
class context;
}

namespace airlock {
class EvidenceService;
class TenantSecrets;
namespace e2b {
class SandboxTokens;
}
namespace fleet {
class Fleet;
class NodeMembership;
struct NodeCapacity;
struct ForwardedCaller;
}  // namespace fleet
namespace templates {
class TemplateBuilder;
}
}  // namespace airlock

namespace airlock::api {

class E2bApi;
class E2bEnvd;
class McpServer;
class IncomingMoves;
class SandboxMover;

// The single route table of every front door (native, E2B control plane,
// E2B envd and guest ports). The HTTP session selects a row from a request's
// head, admits its caller here (one authorization for every door), reads the
// body to the row's limit and runs it; errors are mapped once
// (ErrorMapping's errorStatusFor) and rendered in the row's shape. A door
// adds rows (E2bApi::addRoutes, E2bEnvd::addRoutes), not a stack.
class Router {
  public:
    using Roles = api::Roles;
    static constexpr Roles kPublic = kPublicRoute;
    static constexpr Roles kAgent = kAgentRole;
    static constexpr Roles kApprover = kApproverRole;
    static constexpr Roles kAdmin = kAdminRole;
    static constexpr Roles kDrivers = kAgent | kAdmin;       // run and change things
    static constexpr Roles kReviewers = kApprover | kAdmin;  // decide approvals
    static constexpr Roles kAnyRole = kAgent | kApprover | kAdmin;
    static constexpr Roles kAdmins = kAdmin;
    static constexpr Roles kNodes = kNodeRoute;
    // A template build's request: its spec, Dockerfile and build context.
    static constexpr std::size_t kMaxTemplateBody = 256u << 20;

    using Context = RouteContext;
    using Handler = std::function<ApiResponse(Context&)>;
    using Respond = api::Respond;
    using AsyncHandler = api::AsyncHandler;

    // `services`: the controller's parts (SandboxController::frontDoorServices()).
    Router(FrontDoorServices services, Authenticator& auth, ApiKeys& keys,
           std::string version, std::size_t perTenantLimit = 256);

    // The door a request's head comes through, the row it selects and, for
    // the sandbox doors, the sandbox it names. Throws Error(bad_request) for
    // a half-given E2b-Sandbox-Id/-Port pair.
    struct Selection {
        Door door = Door::native;
        RouteTable::Match match;
        std::string sandboxId;
        const Route* route() const { return match.route; }
    };
    Selection select(const ApiRequest& head) const;
    // A call's caller, the tenant it acts on, its params and its tenant's
    // in-flight slot (held until the answer is sent or the stream ends).
    struct Admission {
        Principal principal;
        std::string tenant;
        std::vector<std::string> params;
        TenantLimiter::Slot slot;
        // E2B's auto-resume of the paused sandbox this request reaches (its
        // caller's access checked): a resume waits on the sandbox's lock and
        // on libvirt, so the caller runs it on a worker, before the row.
        std::function<void()> wake;
        // A native row's auto-resume: how long it took (for Airlock-Resumed-Ms).
        std::shared_ptr<std::int64_t> resumedMs;
        // The sandbox lives on another node of the fleet: the request goes
        // there whole (ForwardSession), the caller signed into it.
        struct Forward {
            std::string node, host, port;
            boost::asio::ssl::context* tls = nullptr;  // the owner's advertise URL is https
            std::map<std::string, std::string> headers;
        };
        std::optional<Forward> forward;
    };
    // The one authorization, for every row of every door: the door's
    // credential (Bearer key, X-API-KEY, a sandbox's access token), the
    // row's roles, the tenant of the object its path names (another
    // tenant's is not found), the limiter. Throws a typed Error.
    Admission admit(const ApiRequest& head, const Selection& selection);
    // Runs a unary row; never throws; `respond` is called exactly once.
    void run(const Route& route, Admission admission, const ApiRequest& request, Respond respond);
    // A connect_stream row's plan (may throw a typed Error).
    ConnectStreamPlan plan(const Route& route, Admission& admission, const ApiRequest& request);
    // A stream row's context for its session.
    StreamContext streamContext(Admission admission, ApiRequest head,
                                std::shared_ptr<void> connectionSlot,
                                boost::asio::thread_pool& workers);
    // Any failure in the shape of the selected row (or of its door, when no
    // row was selected).
    ApiResponse errorFor(const Selection& selection, const ApiRequest& request,
                         std::exception_ptr error) const;
    ApiResponse errorFor(const Selection& selection, const ApiRequest& request,
                         const ErrorStatus& error) const;
    // The answer for a head no row takes: 404, or 405 when the path is routed.
    ApiResponse unrouted(const Selection& selection, const ApiRequest& head) const;

    // A unary call from select to answer (tests and in-process callers).
    // Never throws; `respond` is called exactly once (maybe on another thread).
    void handle(const ApiRequest& request, Respond respond);
    // The blocking form (tests).
    ApiResponse handle(const ApiRequest& request);

    TenantLimiter& limiter() { return limiter_; }
    RouteTable& table() { return table_; }
    // Repository workspaces (without: their routes answer 503).
    void setWorkspaces(workspace::WorkspaceService* w) { workspaces_ = w; }
    // Evidence bundles (without: their routes answer 503).
    void setEvidence(EvidenceService* e) { evidence_ = e; }
    // Tenants' injected secrets (without: their routes answer 503).
    void setTenantSecrets(TenantSecrets* s) { tenantSecrets_ = s; }
    // The fleet this node belongs to (nullptr: a host on its own, listed as
    // the one node "local") and what this host has room for.
    void setNodes(fleet::NodeMembership* membership,
                  std::function<fleet::NodeCapacity()> localCapacity) {
        membership_ = membership;
        localCapacity_ = std::move(localCapacity);
    }
    // The fleet's directory and node credential: requests for sandboxes of
    // other nodes are forwarded, forwarded requests are taken from nodes.
    void setFleet(fleet::Fleet* fleet) { fleet_ = fleet; }
    // A drain with move: this node's sandboxes leave through the mover;
    // other nodes' arrive here (without: a drain cannot move).
    void setMoves(IncomingMoves* incoming, SandboxMover* mover) {
        incoming_ = incoming;
        mover_ = mover;
    }
    // The E2B front door: its rows join the table; its access tokens are a
    // credential admit() checks.
    void setE2b(E2bApi& control, E2bEnvd& envd, const e2b::SandboxTokens& tokens);
    // Template builds (without: their routes answer 503); `buildsDir` holds
    // uploaded build contexts until the builder takes them.
    void setTemplates(templates::TemplateBuilder* builder, std::string buildsDir) {
        templates_ = builder;
        templateBuildsDir_ = std::move(buildsDir);
    }
    // MCP's Streamable HTTP transport at /mcp (rows added once, before serving).
    void setMcp(McpServer& server);
    // --public-domain: previews get their own origin (<token>.<port>-<id>.D)
    // and the /preview/ path form on the API's origin is closed.
    // listenPort: the URL's port when a request's Host names none.
    void setPublicDomain(std::string domain, unsigned listenPort) {
        publicDomain_ = std::move(domain);
        listenPort_ = listenPort;
    }
    const std::string& publicDomain() const { return publicDomain_; }
    // The console's files (a directory without them: /console/ answers 404),
    // and whether the listener is TLS (session cookies are then Secure, and
    // a session's own origin is https).
    void setConsole(const std::string& assetsDir, bool tls) {
        console_ = std::make_unique<ConsoleAssets>(assetsDir);
        secureCookies_ = tls;
    }
    bool consoleInstalled() const { return console_ && console_->installed(); }
    // What wakes GET /v1/events streams (none: the route answers 404).
    void setEventFeed(EventFeed* feed) { eventFeed_ = feed; }
    WebSessions& sessions() { return sessions_; }

    // Every row with the roles it accepts ("GET /v1/sandboxes/{}": kAnyRole),
    // for docs and the route-walking tests.
    struct RouteInfo {
        Door door;
        std::string method, pattern;
        Roles roles;
        bool stream;  // the connection is handed to a session (stream, connect_stream)
    };
    std::vector<RouteInfo> routeTable() const;
    // GET /metrics's body (also served without a key on --metrics-listen).
    std::string metricsText();

  private:
    Route& add(std::string method, const std::string& pattern, Roles roles, Handler handler);
    Route& add(std::string method, const std::string& pattern, Roles roles,
               ApiResponse (Router::*handler)(Context&));
    void add(std::string method, const std::string& pattern, Roles roles,
             void (Router::*handler)(Context&, Respond));
    // A pattern ending in "/**" matches every path below it.
    void addStream(std::string method, const std::string& pattern, Roles roles,
                   std::optional<ApiResponse> (Router::*factory)(StreamHandover&),
                   bool sandboxStream = true);
    // The credential a door's requests carry, resolved to its key.
    Principal callerFor(const ApiRequest& head, Door door, const std::string& sandboxId,
                        std::function<void()>& wake);

    // The handlers, by resource; each file holds one group.
    // Service, templates, sandboxes and snapshots (RouterSandboxes.cpp).
    ApiResponse health(Context& c);
    ApiResponse listTemplates(Context& c);
    ApiResponse createSandbox(Context& c);
    ApiResponse listSandboxes(Context& c);
    ApiResponse getSandbox(Context& c);
    ApiResponse getSandboxMetrics(Context& c);
    ApiResponse deleteSandbox(Context& c);
    ApiResponse pauseSandbox(Context& c);
    ApiResponse resumeSandbox(Context& c);
    ApiResponse setSandboxTimeout(Context& c);
    ApiResponse setSandboxNetwork(Context& c);
    ApiResponse setSandboxSecret(Context& c);
    // A tenant's injected secrets (RouterSecrets.cpp).
    TenantSecrets& tenantSecrets();
    ApiResponse putTenantSecret(Context& c);
    ApiResponse listTenantSecrets(Context& c);
    ApiResponse getTenantSecret(Context& c);
    ApiResponse deleteTenantSecret(Context& c);
    ApiResponse applyTenantSecretHere(Context& c);
    // The change of one taken into the tenant's sandboxes here and on every
    // other node; how many changed here, and the nodes that did not answer.
    nlohmann::json applyTenantSecret(Context& c, const std::string& name);
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
    // The fleet's nodes: admin (RouterNodes.cpp).
    ApiResponse listNodes(Context& c);
    ApiResponse drainNode(Context& c);
    ApiResponse undrainNode(Context& c);
    ApiResponse setDraining(Context& c, bool draining);
    // Another node's drain: asked of that node, as this caller.
    ApiResponse drainElsewhere(Context& c);
    // Who a node-to-node call acts for: the caller this node authenticated.
    static fleet::ForwardedCaller carriedCaller(const Principal& p);
    // Sandboxes arriving from another node (RouterMoves.cpp): node-signed calls only.
    ApiResponse beginArrival(Context& c);
    ApiResponse arrivalPiece(Context& c);
    ApiResponse startArrival(Context& c);
    ApiResponse abortArrival(Context& c);
    IncomingMoves& arrivals(const Context& c);
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
    templates::TemplateBuilder& templateBuilder();
    ApiResponse buildTemplate(Context& c);
    ApiResponse getTemplate(Context& c);
    ApiResponse deleteTemplate(Context& c);
    ApiResponse getTemplateBuild(Context& c);
    std::optional<ApiResponse> templateBuildLogs(StreamHandover& h);
    // The console (RouterConsole.cpp): sessions, events, its files.
    std::string ownOrigin(const ApiRequest& head) const;
    // Forbidden when an Origin names another origin (or, required, is missing).
    void requireOwnOrigin(const ApiRequest& head, bool required) const;
    std::string sessionCookie(const std::string& token, std::chrono::seconds maxAge) const;
    // The caller a console session cookie names (none without the cookie);
    // a mutating call must come from this origin with the session's token.
    std::optional<Principal> sessionCaller(const ApiRequest& head);
    nlohmann::json sessionJson(const Principal& who, const WebSession& s) const;
    std::optional<WebSession> currentSession(Context& c);
    ApiResponse createSession(Context& c);
    ApiResponse getSession(Context& c);
    ApiResponse deleteSession(Context& c);
    ApiResponse consoleFile(Context& c);
    std::optional<ApiResponse> events(StreamHandover& h);
    // Volumes (RouterVolumes.cpp); their files are streamed.
    SandboxVolumes& volumes();
    static bool wakesSandbox(const Route& route);
    void prepareWake(Admission& a);
    ApiResponse createVolume(Context& c);
    ApiResponse listVolumes(Context& c);
    ApiResponse getVolume(Context& c);
    ApiResponse updateVolume(Context& c);
    ApiResponse deleteVolume(Context& c);
    std::optional<ApiResponse> getVolumeFile(StreamHandover& h);
    std::optional<ApiResponse> putVolumeFile(StreamHandover& h);
    ApiResponse deleteVolumeFile(Context& c);
    std::optional<std::string> ownerOf(const std::string& id);
    // A sandbox's JSON naming this node, in a fleet (RouterNodes.cpp).
    nlohmann::json withNode(nlohmann::json sandbox) const;
    // The other nodes' sandboxes in a fleet-wide list (RouterNodes.cpp).
    void addFleetSandboxes(Context& c, nlohmann::json& list);
    void addOtherNodesSandboxes(Context& c, nlohmann::json& list);
    // Every other up node's answer to GET target (its list under `key`),
    // each item naming its node; nodes that did not answer are left out.
    std::map<std::string, nlohmann::json> askOtherNodes(Context& c, const std::string& target,
                                                        const char* key);
    // The other nodes' items appended (none when etcd is unreachable).
    // A moved sandbox's bundles sealed on the nodes it was on before.
    // Those whose node does not answer go in `unavailable` ({id, node}).
    void addEvidenceSealedElsewhere(Context& c, const std::string& sandboxId,
                                    const std::set<std::string>& here, nlohmann::json& list,
                                    nlohmann::json& unavailable);
    void addFleetList(Context& c, const std::string& target, const char* key,
                      nlohmann::json& list);
    // A create placed on a node of the fleet (RouterNodes.cpp).
    // Picks the node (best of three sampled) and sends it the create, the
    // same door's, as this caller; createHere makes it on this node.
    ApiResponse placeCreate(Context& c, const CreateSandboxRequest& request,
                            const std::function<ApiResponse(const std::string& why)>& createHere);
    // Writes why a sandbox made here is here into the fleet's record.
    std::string recordPlacement(const SandboxRecord& r, std::string why);
    // A caller another node authenticated and signed into a forwarded request.
    std::optional<Principal> forwardedCaller(const ApiRequest& head);
    // Where a sandbox of another node lives (its tenant and node), when
    // this node has no such sandbox.
    struct RemoteSandbox {
        std::string tenant, node;
    };
    // A sandbox (sbx-), snapshot (snap-) or approval (apr-) another node
    // holds; tenant empty when only that node knows it.
    std::optional<RemoteSandbox> remoteSandbox(const std::string& id);
    std::optional<RemoteSandbox> remoteObject(const std::string& id);
    Admission::Forward forwardTo(const RemoteSandbox& where, const ApiRequest& head,
                                 const std::optional<Principal>& caller);

    FrontDoorServices services_;
    Authenticator& auth_;
    ApiKeys& keys_;
    std::string version_;
    RouteTable table_;
    TenantLimiter limiter_;
    workspace::WorkspaceService* workspaces_ = nullptr;
    TenantSecrets* tenantSecrets_ = nullptr;
    EvidenceService* evidence_ = nullptr;
    fleet::NodeMembership* membership_ = nullptr;
    fleet::Fleet* fleet_ = nullptr;
    IncomingMoves* incoming_ = nullptr;
    SandboxMover* mover_ = nullptr;
    std::function<fleet::NodeCapacity()> localCapacity_;
    E2bEnvd* e2bEnvd_ = nullptr;
    McpServer* mcp_ = nullptr;
    templates::TemplateBuilder* templates_ = nullptr;
    std::string templateBuildsDir_;
    const e2b::SandboxTokens* e2bTokens_ = nullptr;
    std::string publicDomain_;
    unsigned listenPort_ = 0;
    WebSessions sessions_;
    std::unique_ptr<ConsoleAssets> console_;
    EventFeed* eventFeed_ = nullptr;
    bool secureCookies_ = false;
};

}  // namespace airlock::api

#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/Authenticator.hpp"
#include "api/HttpTypes.hpp"
#include "api/StreamContext.hpp"
#include "store/TenantScope.hpp"

namespace airlock::api {

class ConnectStreamSession;

// The front doors Airlock serves on one listener. Each names how a caller
// proves who it is and how errors are shaped; the rows are in one table.
enum class Door {
    native,       // /v1/..., /healthz, /metrics, /preview/...: Authorization: Bearer
    e2b_control,  // /sandboxes, /v2/sandboxes: X-API-KEY
    e2b_envd,     // E2b-Sandbox-Id/-Port or Host naming envd's port: X-Access-Token
    e2b_port,     // the same naming another guest port: the sandbox's own access rule
};
std::string_view doorName(Door door);

// How a route's errors are rendered; the status and message come from the
// one mapping (ErrorMapping's errorStatusFor).
enum class ErrorShape {
    native,   // {"error": {"code", "message"}}
    e2b,      // {"code": status, "message"}
    connect,  // Connect's {"code": "not_found", "message"} with its status
};

// What the HTTP session does with a matched request.
enum class RouteKind {
    unary,           // the body is read whole (up to the row's limit), one answer
    stream,          // the connection is handed over after the head
    connect_stream,  // the body (one Connect envelope) is read, then a Connect stream
};

// The roles a route accepts (a bit per Role); kPublic: no credential at all
// (or one the handler checks itself: a preview's capability, a public port).
using Roles = unsigned;
inline constexpr Roles kPublicRoute = 0;
inline constexpr Roles kAgentRole = 1u << static_cast<unsigned>(Role::agent);
inline constexpr Roles kApproverRole = 1u << static_cast<unsigned>(Role::approver);
inline constexpr Roles kAdminRole = 1u << static_cast<unsigned>(Role::admin);
// Calls another node of the fleet signed (the cluster token), and no key of
// any role: a drain's moves.
inline constexpr Roles kNodeRoute = 1u << 8;
std::string rolesText(Roles roles);

// One authorized call as a handler sees it.
struct RouteContext {
    explicit RouteContext(const ApiRequest& r, Door d = Door::native) : request(r), door(d) {}
    const ApiRequest& request;
    Door door;
    // The tenant whose objects the call acts on: the key's own, or for an
    // admin key the owner of the object its path names. Empty for public routes.
    std::string tenant;
    // The {…} segments of the path, in order; for the sandbox doors (envd,
    // ports) the sandbox the request names comes first.
    std::vector<std::string> params;
    Principal principal;  // who calls (authenticated routes)
    bool admin() const { return principal.role == Role::admin; }
    // What a listing covers: the caller's tenant, or for an admin every tenant.
    TenantScope scope() const {
        return admin() ? TenantScope::all() : TenantScope::only(tenant);
    }
};

// A route whose work outlives the call answers through `respond`, exactly
// once, from any thread.
using Respond = std::function<void(ApiResponse)>;
using AsyncHandler = std::function<void(RouteContext&, Respond)>;

// A server-streaming Connect call, parsed and admitted: run() feeds the
// session (on a worker), ending it with an error when the call fails.
struct ConnectStreamPlan {
    std::chrono::seconds keepalive{90};
    std::string keepaliveJson;
    std::optional<std::chrono::milliseconds> deadline;
    std::function<void(const std::shared_ptr<ConnectStreamSession>&)> run;
};
using ConnectPlanner = std::function<ConnectStreamPlan(RouteContext&)>;

// A row's answers by status class (1xx-5xx), and the connections it handed
// to a streaming session (their status is the session's).
struct RouteCounters {
    static constexpr std::size_t kHandedOver = 5;
    std::array<std::atomic<std::uint64_t>, 6> answers{};
};

// One row: everything dispatch, authorization, limits, errors and metrics need.
struct Route {
    Door door = Door::native;
    std::string method;                // "*": any method
    std::vector<std::string> pattern;  // "{}" matches one segment
    bool prefix = false;               // the pattern matches the start of the path
    Roles roles = kPublicRoute;
    std::size_t bodyLimit = 0;  // unary and connect_stream bodies; 0: the server's default
    // A stream whose first param names a sandbox (found before the handover).
    bool sandboxStream = true;
    // A public row's own check of the request head (its capability), before
    // any of its body is read; it throws to refuse.
    std::function<void(const ApiRequest& head, const std::vector<std::string>& params)> headCheck;
    ErrorShape errors = ErrorShape::native;
    RouteKind kind = RouteKind::unary;
    AsyncHandler handler;
    StreamFactory stream;
    ConnectPlanner planner;
    std::shared_ptr<RouteCounters> counters = std::make_shared<RouteCounters>();
    // "GET /v1/sandboxes/{}" ("/**" for a prefix): docs, tests and metrics.
    std::string label() const;
};

// The rows of every door, matched by door, then path, then method.
class RouteTable {
  public:
    // Rows are added while the server is set up, never once it serves.
    Route& add(Route route);
    // A path pattern as rows take it: "/v1/sandboxes/{}/exec", "/preview/{}/**".
    static void setPattern(Route& route, const std::string& pattern);

    struct Match {
        const Route* route = nullptr;
        std::vector<std::string> params;
        bool pathMatched = false;  // some row has the path with another method (405)
    };
    Match match(Door door, const std::string& method, const std::string& path) const;
    const std::deque<Route>& routes() const { return routes_; }

    // An answer sent for a row (nullptr: no row took the request) of a door.
    void countAnswer(const Route* route, Door door, int status);
    void countHandover(const Route& route);
    // airlock_http_requests_total, a series per door, row and status class seen.
    std::string metricsText() const;

  private:
    std::deque<Route> routes_;  // stable addresses: a Match points into it
    std::array<RouteCounters, 4> unrouted_;  // by door
};

std::vector<std::string> splitPath(const std::string& path);

}  // namespace airlock::api

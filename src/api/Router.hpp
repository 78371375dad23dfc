#pragma once
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "api/Authenticator.hpp"
#include "api/HttpTypes.hpp"
#include "api/TenantLimiter.hpp"
#include "controller/SandboxController.hpp"

namespace airlock::api {

// The single route table. Each handler parses its request into a controller
// call and maps the result back to JSON; errors are mapped in one place
// (ErrorMapping) by handle().
class Router {
public:
    struct Context {
        const ApiRequest& request;
        std::string tenant;                 // empty for unauthenticated routes
        std::vector<std::string> params;    // the {…} segments of the path, in order
    };
    using Handler = std::function<ApiResponse(Context&)>;
    // Routes whose work outlives the call (a command runs for an hour): the
    // handler returns at once and calls `respond` later, exactly once, from
    // any thread. Errors thrown before it returns are mapped as usual.
    using Respond = std::function<void(ApiResponse)>;
    using AsyncHandler = std::function<void(Context&, Respond)>;

    Router(SandboxController& controller, Authenticator& auth, std::string version,
           std::size_t perTenantLimit = 256);

    // Never throws; `respond` is called exactly once (maybe on another thread).
    void handle(const ApiRequest& request, Respond respond);
    // The blocking form (tests).
    ApiResponse handle(const ApiRequest& request);
    // The response for an exception (the one error mapping).
    static ApiResponse responseFor(std::exception_ptr error, const ApiRequest& request);

    TenantLimiter& limiter() { return limiter_; }

    // Routes whose bodies stream (the HTTP session serves them itself).
    enum class StreamKind { none, exec_websocket, upload, download, process_logs, preview };
    struct StreamMatch {
        StreamKind kind = StreamKind::none;
        bool authenticated = true;
        std::vector<std::string> params;
    };
    StreamMatch matchStream(const std::string& method, const std::string& path) const;
    // Throws Error(unauthorized).
    std::string authenticate(const ApiRequest& request) { return auth_.tenantFor(request.authorization); }

private:
    struct Route {
        std::string method;
        std::vector<std::string> pattern;  // "{}" matches one segment
        bool authenticated;
        AsyncHandler handler;
    };
    void add(std::string method, const std::string& pattern, bool authenticated, Handler handler);
    void addAsync(std::string method, const std::string& pattern, bool authenticated, AsyncHandler handler);
    void addStream(std::string method, const std::string& pattern, bool authenticated, StreamKind kind);
    static bool matchPattern(const std::vector<std::string>& pattern, const std::vector<std::string>& segments,
                             std::vector<std::string>& params, bool prefix = false);
    struct StreamRoute {
        std::string method;
        std::vector<std::string> pattern;
        bool authenticated;
        StreamKind kind;
        bool prefix;  // the pattern matches the start of the path (preview)
    };
    std::vector<StreamRoute> streamRoutes_;
    void dispatch(const ApiRequest& request, Respond& respond);

    SandboxController& controller_;
    Authenticator& auth_;
    std::string version_;
    std::vector<Route> routes_;
    TenantLimiter limiter_;
};

std::vector<std::string> splitPath(const std::string& path);

}  // namespace airlock::api

#include "api/Router.hpp"

#include <nlohmann/json.hpp>

#include "api/ErrorMapping.hpp"
#include "api/RequestParsing.hpp"
#include "core/Log.hpp"

namespace airlock::api {
namespace {
using nlohmann::json;

ApiResponse jsonResponse(int status, const json& j) {
    return ApiResponse{status, "application/json", j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"};
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

void Router::add(std::string method, const std::string& pattern, bool authenticated, Handler handler) {
    routes_.push_back(Route{std::move(method), splitPath(pattern), authenticated, std::move(handler)});
}

Router::Router(SandboxController& controller, Authenticator& auth, std::string version)
    : controller_(controller), auth_(auth), version_(std::move(version)) {
    add("GET", "/healthz", false, [this](Context&) {
        return jsonResponse(200, {{"status", "ok"},
                                  {"accel", accelName(controller_.accel())},
                                  {"version", version_},
                                  {"templates", controller_.templates().list().size()}});
    });
    add("GET", "/v1/templates", true, [this](Context&) {
        json list = json::array();
        for (const auto& t : controller_.templates().list())
            list.push_back({{"name", t.name},
                            {"vcpus", t.vcpus},
                            {"memory_mib", t.memoryMib},
                            {"digest", t.digest},
                            {"kernel_version", t.kernelVersion}});
        return jsonResponse(200, {{"templates", list}});
    });
    add("POST", "/v1/sandboxes", true, [this](Context& c) {
        auto request = parseCreateSandbox(c.request.body);
        return jsonResponse(201, sandboxJson(controller_.create(c.tenant, request)));
    });
    add("GET", "/v1/sandboxes", true, [this](Context& c) {
        json list = json::array();
        for (const auto& r : controller_.list(c.tenant)) list.push_back(sandboxJson(r));
        return jsonResponse(200, {{"sandboxes", list}});
    });
    add("GET", "/v1/sandboxes/{}", true, [this](Context& c) {
        return jsonResponse(200, sandboxJson(controller_.get(c.tenant, c.params[0])));
    });
    add("DELETE", "/v1/sandboxes/{}", true, [this](Context& c) {
        controller_.destroy(c.tenant, c.params[0]);
        return ApiResponse{204, "", ""};
    });
    add("POST", "/v1/sandboxes/{}/exec", true, [this](Context& c) {
        // Existence first: a missing sandbox is 404 whatever the body says.
        controller_.get(c.tenant, c.params[0]);
        auto options = parseExec(c.request.body);
        return jsonResponse(200, execOutputJson(controller_.exec(c.tenant, c.params[0], options)));
    });
}

ApiResponse Router::dispatch(const ApiRequest& request) {
    auto segments = splitPath(request.path);
    bool pathMatched = false;
    for (const auto& route : routes_) {
        if (route.pattern.size() != segments.size()) continue;
        std::vector<std::string> params;
        bool match = true;
        for (std::size_t i = 0; i < segments.size() && match; ++i) {
            if (route.pattern[i] == "{}")
                params.push_back(segments[i]);
            else
                match = route.pattern[i] == segments[i];
        }
        if (!match) continue;
        pathMatched = true;
        if (route.method != request.method) continue;
        Context ctx{request, {}, std::move(params)};
        if (route.authenticated) ctx.tenant = auth_.tenantFor(request.authorization);
        return route.handler(ctx);
    }
    if (pathMatched) return errorResponse(405, "method_not_allowed", request.method + " is not allowed on " + request.path);
    return errorResponse(ErrorCode::not_found, "no route for " + request.method + " " + request.path);
}

ApiResponse Router::handle(const ApiRequest& request) {
    try {
        return dispatch(request);
    } catch (const Error& e) {
        if (httpStatusFor(e.code()) >= 500)
            logWarn("api", request.method + " " + request.path + ": " + e.what());
        return errorResponse(e.code(), e.what());
    } catch (const std::exception& e) {
        logError("api", request.method + " " + request.path + ": unexpected " + e.what());
        return errorResponse(ErrorCode::internal, "internal error");
    }
}

}  // namespace airlock::api

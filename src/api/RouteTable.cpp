#include "api/RouteTable.hpp"

#include <sstream>

namespace airlock::api {

std::string_view doorName(Door door) {
    switch (door) {
        case Door::native:
            return "native";
        case Door::e2b_control:
            return "e2b_control";
        case Door::e2b_envd:
            return "e2b_envd";
        case Door::e2b_port:
            return "e2b_port";
    }
    return "native";
}

std::string rolesText(Roles roles) {
    std::string out;
    for (Role r : {Role::agent, Role::approver, Role::admin})
        if (roles & (1u << static_cast<unsigned>(r)))
            out += (out.empty() ? "" : " or ") + roleName(r);
    if (roles & kNodeRoute) out += (out.empty() ? "" : " or ") + std::string("node-signed");
    return out;
}

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

std::string Route::label() const {
    std::string path;
    for (const auto& s : pattern) path += "/" + s;
    if (prefix) path += "/**";
    return method + " " + (path.empty() ? "/" : path);
}

void RouteTable::setPattern(Route& route, const std::string& pattern) {
    route.prefix = pattern == "/**" ||
                   (pattern.size() > 3 && pattern.compare(pattern.size() - 3, 3, "/**") == 0);
    route.pattern = splitPath(route.prefix ? pattern.substr(0, pattern.size() - 3) : pattern);
}

Route& RouteTable::add(Route route) {
    routes_.push_back(std::move(route));
    return routes_.back();
}

namespace {
bool matchPattern(const Route& route, const std::vector<std::string>& segments,
                  std::vector<std::string>& params) {
    const auto& pattern = route.pattern;
    if (route.prefix ? segments.size() < pattern.size() : segments.size() != pattern.size())
        return false;
    params.clear();
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] == "{}")
            params.push_back(segments[i]);
        else if (pattern[i] != segments[i])
            return false;
    }
    return true;
}
}  // namespace

RouteTable::Match RouteTable::match(Door door, const std::string& method,
                                    const std::string& path) const {
    auto segments = splitPath(path);
    Match out;
    for (const auto& route : routes_) {
        if (route.door != door) continue;
        std::vector<std::string> params;
        if (!matchPattern(route, segments, params)) continue;
        out.pathMatched = true;
        if (route.method != "*" && route.method != method) continue;
        out.route = &route;
        out.params = std::move(params);
        return out;
    }
    return out;
}

void RouteTable::countAnswer(const Route* route, Door door, int status) {
    std::size_t index = status >= 100 && status < 600 ? static_cast<std::size_t>(status / 100 - 1)
                                                      : 4;
    auto& counters = route ? *route->counters : unrouted_[static_cast<std::size_t>(door)];
    counters.answers[index].fetch_add(1, std::memory_order_relaxed);
}

void RouteTable::countHandover(const Route& route) {
    route.counters->answers[RouteCounters::kHandedOver].fetch_add(1, std::memory_order_relaxed);
}

std::string RouteTable::metricsText() const {
    static const char* kClasses[] = {"1xx", "2xx", "3xx", "4xx", "5xx", "stream"};
    std::ostringstream m;
    m << "# HELP airlock_http_requests_total Requests answered, by door, route-table row and "
         "status class (stream: handed to a streaming session).\n"
         "# TYPE airlock_http_requests_total counter\n";
    auto series = [&](Door door, const std::string& row, const RouteCounters& c) {
        for (std::size_t i = 0; i < c.answers.size(); ++i)
            if (auto n = c.answers[i].load(std::memory_order_relaxed))
                m << "airlock_http_requests_total{door=\"" << doorName(door) << "\",route=\""
                  << row << "\",status=\"" << kClasses[i] << "\"} " << n << "\n";
    };
    for (const auto& r : routes_) series(r.door, r.label(), *r.counters);
    for (Door d : {Door::native, Door::e2b_control, Door::e2b_envd, Door::e2b_port})
        series(d, "unrouted", unrouted_[static_cast<std::size_t>(d)]);
    return m.str();
}

}  // namespace airlock::api

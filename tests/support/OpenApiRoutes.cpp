#include "support/OpenApiRoutes.hpp"

#include <cctype>
#include <set>

#include "support/ApiSpec.hpp"

namespace airlock::test {

std::vector<DocumentedRoute> documentedRoutes() { return documentedRoutes(ApiSpec::get()); }

std::vector<DocumentedRoute> documentedRoutes(const ApiSpec& spec) {
    // Path items also hold parameters, summaries and descriptions.
    static const std::set<std::string> kMethods{"get",    "post", "put",    "patch",
                                                "delete", "head", "options"};
    auto normalize = [](const std::string& path) {
        std::string out;
        for (std::size_t i = 0; i < path.size(); ++i) {
            if (path[i] == '{') {
                out += "{}";
                i = path.find('}', i);
            } else {
                out += path[i];
            }
        }
        return out;
    };
    std::vector<DocumentedRoute> routes;
    for (const auto& [path, item] : spec.document().at("paths").items()) {
        if (!item.is_object()) continue;
        for (const auto& [method, operation] : item.items()) {
            if (!kMethods.count(method)) continue;
            std::string upper = method;
            for (auto& ch : upper)
                ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
            std::string roles;
            if (auto r = operation.find("x-roles"); r != operation.end() && r->is_array()) {
                for (const auto& role : *r)
                    roles += (roles.empty() ? "" : ", ") + role.get<std::string>();
                roles = "[" + roles + "]";
            }
            std::string door = "native";
            if (auto d = operation.find("x-door"); d != operation.end() && d->is_string())
                door = d->get<std::string>();
            routes.push_back({door, upper, path, normalize(path), roles});
        }
    }
    return routes;
}

}  // namespace airlock::test

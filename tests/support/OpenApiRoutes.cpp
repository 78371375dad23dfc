#include "support/OpenApiRoutes.hpp"

#include <cctype>
#include <fstream>
#include <set>
#include <stdexcept>

namespace airlock::test {

std::vector<DocumentedRoute> documentedRoutes() {
    // Path items also hold parameters, summaries and descriptions.
    static const std::set<std::string> kMethods{"get",    "post", "put",    "patch",
                                                "delete", "head", "options"};
    std::ifstream in(std::string(AIRLOCK_SOURCE_DIR) + "/api/openapi.yaml");
    if (!in) throw std::runtime_error("cannot read api/openapi.yaml");
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
    std::string line, path;
    while (std::getline(in, line)) {
        if (line.rfind("  /", 0) == 0 && line.back() == ':') {
            path = line.substr(2, line.size() - 3);
        } else if (!path.empty() && line.rfind("    ", 0) == 0 && line.size() > 5 &&
                   line[4] != ' ' && line.back() == ':' &&
                   kMethods.count(line.substr(4, line.size() - 5))) {
            std::string method = line.substr(4, line.size() - 5);
            for (auto& ch : method)
                ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
            routes.push_back({method, path, normalize(path), ""});
        } else if (line.rfind("      x-roles: ", 0) == 0 && !routes.empty()) {
            routes.back().roles = line.substr(15);
        } else if (!line.empty() && line[0] != ' ') {
            path.clear();  // a new top-level section (components:...)
        }
    }
    return routes;
}

}  // namespace airlock::test

#pragma once
#include <string>
#include <vector>

namespace airlock::test {

class ApiSpec;

// One operation of an API document with the roles its x-roles names and
// the door its x-door names ("native" when it names none).
struct DocumentedRoute {
    std::string door;        // "native", "e2b", "e2b_envd", "e2b_port"
    std::string method;      // "GET"
    std::string path;        // "/v1/sandboxes/{id}/execs/{exec_id}"
    std::string normalized;  // "/v1/sandboxes/{}/execs/{}"
    std::string roles;       // "[agent, admin]"; empty for public routes
    bool has(const std::string& role) const { return roles.find(role) != std::string::npos; }
};

// Every operation of a document (api/openapi.yaml by default).
std::vector<DocumentedRoute> documentedRoutes();
std::vector<DocumentedRoute> documentedRoutes(const ApiSpec& spec);

}  // namespace airlock::test

#pragma once
#include <string>
#include <vector>

namespace airlock::test {

// One operation of api/openapi.yaml with the roles its x-roles names.
struct DocumentedRoute {
    std::string method;      // "GET"
    std::string path;        // "/v1/sandboxes/{id}/execs/{exec_id}"
    std::string normalized;  // "/v1/sandboxes/{}/execs/{}"
    std::string roles;       // "[agent, admin]"; empty for public routes
    bool has(const std::string& role) const { return roles.find(role) != std::string::npos; }
};

// Every operation in api/openapi.yaml, read from ApiSpec's parsed document.
std::vector<DocumentedRoute> documentedRoutes();

}  // namespace airlock::test

#pragma once
#include <map>
#include <string>

namespace airlock::api {

// The HTTP layer's own request/response shapes: the router never sees Beast.
struct ApiRequest {
    std::string method;  // "GET", "POST", ...
    std::string path;    // without the query string
    std::map<std::string, std::string> query;
    std::string authorization;  // the Authorization header, verbatim
    std::string contentType;
    std::string host;  // the Host header: preview URLs are built on it
    std::string body;
    // The few other headers some routes read, by lower-case name (the E2B
    // front door's X-API-KEY, E2b-Sandbox-Id, X-Access-Token, Connect-*).
    std::map<std::string, std::string> headers;
    // The request line's target as sent (path and query, undecoded): what a
    // node signs when it forwards the request.
    std::string target;
    std::string header(const std::string& lowerName) const {
        auto it = headers.find(lowerName);
        return it == headers.end() ? std::string() : it->second;
    }
};

struct ApiResponse {
    ApiResponse() = default;
    ApiResponse(int s, std::string type, std::string b)
        : status(s), contentType(std::move(type)), body(std::move(b)) {}
    int status = 200;
    std::string contentType = "application/json";
    std::string body;
    std::map<std::string, std::string> headers;  // extra response headers
};

}  // namespace airlock::api

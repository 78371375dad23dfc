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
};

struct ApiResponse {
    int status = 200;
    std::string contentType = "application/json";
    std::string body;
};

}  // namespace airlock::api

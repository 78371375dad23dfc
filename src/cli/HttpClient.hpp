#pragma once
#include <chrono>
#include <string>

namespace airlock::cli {

struct HttpResult {
    int status = 0;
    std::string body;
};

// A small synchronous HTTP/1.1 client for the CLI and the end-to-end tests.
// Base URL: http://HOST:PORT (AIRLOCK_URL). Throws std::runtime_error when
// the server cannot be reached.
class HttpClient {
public:
    HttpClient(std::string baseUrl, std::string apiKey);
    HttpResult request(const std::string& method, const std::string& target, const std::string& body = {},
                       const std::string& contentType = "application/json",
                       std::chrono::seconds timeout = std::chrono::seconds(600));
    const std::string& host() const { return host_; }
    const std::string& port() const { return port_; }

private:
    std::string host_, port_, apiKey_;
};

}  // namespace airlock::cli

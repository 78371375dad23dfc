#pragma once
#include <chrono>
#include <functional>
#include <map>
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
    // Streams a local file as the request body (never whole in memory).
    HttpResult putFile(const std::string& target, const std::string& localPath);
    // Streams a 200 response body to `sink` as it arrives; other statuses
    // come back with their (small) body.
    HttpResult getStreaming(const std::string& target, const std::function<void(const char*, std::size_t)>& sink);
    // Any request with its own headers; the answer's head goes to onHead
    // (status, headers by lower-case name) and its body to `sink` as it
    // arrives, whatever the status (chunked or close-delimited bodies too).
    using Headers = std::map<std::string, std::string>;
    void exchange(const std::string& method, const std::string& target, const std::string& body,
                  const Headers& headers, const std::function<void(int, const Headers&)>& onHead,
                  const std::function<void(const char*, std::size_t)>& sink,
                  std::chrono::seconds timeout);
    const std::string& apiKey() const { return apiKey_; }
    const std::string& host() const { return host_; }
    const std::string& port() const { return port_; }

private:
    std::string host_, port_, apiKey_;
};

}  // namespace airlock::cli

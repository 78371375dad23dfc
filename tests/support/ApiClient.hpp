#pragma once
#include <string>

#include "cli/HttpClient.hpp"

namespace airlock::test {

// The e2e tests' client of the Airlock API: every answer it gets is checked
// against api/openapi.yaml (ApiSpec) and a mismatch fails the running test,
// so the spec cannot drift from what the server sends.
class ApiClient : public cli::HttpClient {
  public:
    using cli::HttpClient::HttpClient;
    cli::HttpResult request(const std::string& method, const std::string& target,
                            const std::string& body = {},
                            const std::string& contentType = "application/json",
                            std::chrono::seconds timeout = std::chrono::seconds(600));
    cli::HttpResult putFile(const std::string& target, const std::string& localPath);

  private:
    void checkAgainstSpec(const std::string& method, const std::string& target,
                          const cli::HttpResult& result);
};

}  // namespace airlock::test

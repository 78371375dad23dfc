#include "support/ApiClient.hpp"

#include <gtest/gtest.h>

#include "support/ApiSpec.hpp"

namespace airlock::test {

cli::HttpResult ApiClient::request(const std::string& method, const std::string& target,
                                   const std::string& body, const std::string& contentType,
                                   std::chrono::seconds timeout) {
    auto result = cli::HttpClient::request(method, target, body, contentType, timeout);
    checkAgainstSpec(method, target, result);
    return result;
}

cli::HttpResult ApiClient::putFile(const std::string& target, const std::string& localPath) {
    auto result = cli::HttpClient::putFile(target, localPath);
    checkAgainstSpec("PUT", target, result);
    return result;
}

void ApiClient::checkAgainstSpec(const std::string& method, const std::string& target,
                                 const cli::HttpResult& result) {
    std::string mismatch = ApiSpec::get().check(method, target, result.status, result.body);
    if (!mismatch.empty())
        ADD_FAILURE() << "the response is not what api/openapi.yaml says: " << mismatch
                      << "\n  body: " << result.body.substr(0, 600);
}

}  // namespace airlock::test

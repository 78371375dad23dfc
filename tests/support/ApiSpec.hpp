#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace airlock::test {

// api/openapi.yaml, read once per process (through Debian's python3-yaml),
// and the check of one response against it: the operation that serves the
// request's method and path, the status among its responses (an error
// status, 4xx or 5xx, not listed there is held to the Error schema every
// error uses) and the body against that response's JSON schema. The e2e
// tests' client runs it on every answer it gets.
class ApiSpec {
  public:
    static const ApiSpec& get();
    // api/e2b.yaml: the E2B door's rows (control plane, envd, guest ports).
    static const ApiSpec& e2b();

    // Empty when the response is what the spec says; otherwise what is not.
    std::string check(const std::string& method, const std::string& target, int status,
                      const std::string& body) const;
    // "METHOD /path STATUS" of every documented 2xx/3xx response that has no
    // JSON schema (raw bodies, streams), for the coverage test.
    std::vector<std::string> responsesWithoutSchema() const;

    // The whole document, as parsed.
    const nlohmann::json& document() const { return doc_; }

    // Exposed for the validator's own unit test.
    std::string validate(const nlohmann::json& schema, const nlohmann::json& value,
                         const std::string& where) const;
    explicit ApiSpec(nlohmann::json document);

  private:
    // The spec path ("/v1/sandboxes/{id}") serving a request path; the most
    // literal one when several match. Empty when none.
    std::string pathFor(const std::string& path) const;
    const nlohmann::json& resolve(const nlohmann::json& schema) const;

    nlohmann::json doc_;
};

}  // namespace airlock::test

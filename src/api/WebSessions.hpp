#pragma once
#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace airlock::api {

// A browser's sign-in: an API key exchanged for a session the console's
// cookie names. The cookie's value is a secret token kept here only as its
// digest; the session carries the key's id (checked against the key store on
// every use, so revoking the key ends it) and the token a mutating request
// must echo (X-CSRF-Token).
struct WebSession {
    std::string id;  // ses-…: names the session in answers, never authenticates
    std::string keyId;
    std::string csrfToken;
    std::chrono::system_clock::time_point expiresAt;
};

// The live sessions, in memory (a restart signs browsers out), bounded in
// all and per key: the oldest goes first.
class WebSessions {
  public:
    static constexpr const char* kCookie = "airlock_session";
    static constexpr std::chrono::hours kLifetime{12};
    static constexpr std::size_t kMaxSessions = 4096;
    static constexpr std::size_t kMaxPerKey = 32;

    // A new session for the key; the token is the cookie's value.
    std::pair<std::string, WebSession> create(const std::string& keyId);
    // The session a cookie's token names, while it has not expired.
    std::optional<WebSession> find(const std::string& token);
    void revoke(const std::string& token);
    std::size_t size();

    // The value of cookie `name` in a Cookie header ("" when absent).
    static std::string cookieValue(const std::string& cookieHeader, const std::string& name);

  private:
    void evictOldestLocked(const std::string& keyId);
    std::mutex mutex_;
    std::map<std::string, WebSession> byDigest_;  // sha256(token) -> session
};

}  // namespace airlock::api

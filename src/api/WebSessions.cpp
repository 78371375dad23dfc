#include "api/WebSessions.hpp"

#include <algorithm>

#include "core/Ids.hpp"
#include "core/Sha256.hpp"

namespace airlock::api {

std::pair<std::string, WebSession> WebSessions::create(const std::string& keyId) {
    std::string token = newSecretToken();
    WebSession s{newId("ses-"), keyId, newSecretToken(),
                 std::chrono::system_clock::now() + kLifetime};
    std::lock_guard lock(mutex_);
    evictOldestLocked(keyId);
    byDigest_[sha256Hex(token)] = s;
    return {token, s};
}

void WebSessions::evictOldestLocked(const std::string& keyId) {
    auto now = std::chrono::system_clock::now();
    std::erase_if(byDigest_, [&](const auto& e) { return e.second.expiresAt <= now; });
    auto oldest = [&](auto pred) {
        auto best = byDigest_.end();
        std::size_t n = 0;
        for (auto it = byDigest_.begin(); it != byDigest_.end(); ++it) {
            if (!pred(it->second)) continue;
            ++n;
            if (best == byDigest_.end() || it->second.expiresAt < best->second.expiresAt) best = it;
        }
        return std::make_pair(best, n);
    };
    if (auto [it, n] = oldest([&](const WebSession& s) { return s.keyId == keyId; });
        n >= kMaxPerKey)
        byDigest_.erase(it);
    if (byDigest_.size() >= kMaxSessions)
        byDigest_.erase(oldest([](const WebSession&) { return true; }).first);
}

std::optional<WebSession> WebSessions::find(const std::string& token) {
    if (token.empty()) return std::nullopt;
    std::lock_guard lock(mutex_);
    auto it = byDigest_.find(sha256Hex(token));
    if (it == byDigest_.end()) return std::nullopt;
    if (it->second.expiresAt <= std::chrono::system_clock::now()) {
        byDigest_.erase(it);
        return std::nullopt;
    }
    return it->second;
}

void WebSessions::revoke(const std::string& token) {
    std::lock_guard lock(mutex_);
    byDigest_.erase(sha256Hex(token));
}

std::size_t WebSessions::size() {
    std::lock_guard lock(mutex_);
    return byDigest_.size();
}

std::string WebSessions::cookieValue(const std::string& header, const std::string& name) {
    std::size_t at = 0;
    while (at < header.size()) {
        auto end = header.find(';', at);
        if (end == std::string::npos) end = header.size();
        std::string_view pair(header.data() + at, end - at);
        while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
        auto eq = pair.find('=');
        if (eq != std::string_view::npos && pair.substr(0, eq) == name) {
            auto value = pair.substr(eq + 1);
            while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
            return std::string(value);
        }
        at = end + 1;
    }
    return "";
}

}  // namespace airlock::api

#include "mcp/McpSessions.hpp"

#include <vector>

#include "core/Hex.hpp"
#include "core/Ids.hpp"

namespace airlock::mcp {

namespace {
constexpr std::size_t kMaxTombstones = 256;
}

std::vector<std::function<void()>> McpSessions::eraseLocked(
    std::map<std::string, Entry>::iterator it) {
    std::vector<std::function<void()>> cancels;
    for (auto& [id, cancel] : it->second.inFlight)
        if (cancel) cancels.push_back(std::move(cancel));
    sessions_.erase(it);
    return cancels;
}

void McpSessions::expireLocked(Clock::time_point now) {
    for (auto it = sessions_.begin(); it != sessions_.end();) {
        // A session with a call running is in use, however long the call.
        if (it->second.inFlight.empty() && now - it->second.used > limits_.idle)
            it = sessions_.erase(it);
        else
            ++it;
    }
}

std::string McpSessions::open(const std::string& keyId, const std::string& protocolVersion,
                              Clock::time_point now) {
    std::vector<std::function<void()>> cancels;
    std::string id = hexEncode(randomBytes(16));
    {
        std::lock_guard lock(mutex_);
        expireLocked(now);
        // Past the key's share (or the whole), its least recently used goes.
        auto evictOldest = [&](bool sameKey) {
            auto oldest = sessions_.end();
            for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
                if ((!sameKey || it->second.session.keyId == keyId) &&
                    (oldest == sessions_.end() || it->second.used < oldest->second.used))
                    oldest = it;
            if (oldest != sessions_.end())
                for (auto& c : eraseLocked(oldest)) cancels.push_back(std::move(c));
        };
        std::size_t mine = 0;
        for (const auto& [sid, e] : sessions_) mine += e.session.keyId == keyId;
        if (mine >= limits_.perKey) evictOldest(true);
        if (sessions_.size() >= limits_.total) evictOldest(false);
        Entry e;
        e.session = Session{id, keyId, protocolVersion};
        e.used = now;
        sessions_.emplace(id, std::move(e));
    }
    for (auto& c : cancels) c();
    return id;
}

std::optional<McpSessions::Session> McpSessions::find(const std::string& id,
                                                      const std::string& keyId,
                                                      Clock::time_point now) {
    std::lock_guard lock(mutex_);
    auto it = sessions_.find(id);
    if (it == sessions_.end() || it->second.session.keyId != keyId) return std::nullopt;
    if (it->second.inFlight.empty() && now - it->second.used > limits_.idle) {
        sessions_.erase(it);
        return std::nullopt;
    }
    it->second.used = now;
    return it->second.session;
}

bool McpSessions::close(const std::string& id, const std::string& keyId) {
    std::vector<std::function<void()>> cancels;
    {
        std::lock_guard lock(mutex_);
        auto it = sessions_.find(id);
        if (it == sessions_.end() || it->second.session.keyId != keyId) return false;
        cancels = eraseLocked(it);
    }
    for (auto& c : cancels) c();
    return true;
}

void McpSessions::closeAll() {
    std::vector<std::function<void()>> cancels;
    {
        std::lock_guard lock(mutex_);
        while (!sessions_.empty())
            for (auto& c : eraseLocked(sessions_.begin())) cancels.push_back(std::move(c));
    }
    for (auto& c : cancels) c();
}

std::size_t McpSessions::size() {
    std::lock_guard lock(mutex_);
    return sessions_.size();
}

bool McpSessions::begin(const std::string& sessionId, const std::string& requestId,
                        std::function<void()> cancel) {
    std::lock_guard lock(mutex_);
    auto it = sessions_.find(sessionId);
    if (it == sessions_.end()) return false;
    auto& e = it->second;
    if (e.cancelled.erase(requestId) > 0) return false;
    if (e.inFlight.size() >= limits_.inFlightPerSession || e.inFlight.count(requestId))
        return false;
    e.inFlight.emplace(requestId, std::move(cancel));
    e.used = Clock::now();
    return true;
}

void McpSessions::end(const std::string& sessionId, const std::string& requestId) {
    std::lock_guard lock(mutex_);
    auto it = sessions_.find(sessionId);
    if (it == sessions_.end()) return;
    it->second.inFlight.erase(requestId);
    it->second.used = Clock::now();
}

bool McpSessions::cancel(const std::string& sessionId, const std::string& requestId) {
    std::function<void()> stop;
    {
        std::lock_guard lock(mutex_);
        auto it = sessions_.find(sessionId);
        if (it == sessions_.end()) return false;
        auto& e = it->second;
        auto call = e.inFlight.find(requestId);
        if (call == e.inFlight.end()) {
            if (e.cancelled.size() >= kMaxTombstones) e.cancelled.erase(e.cancelled.begin());
            e.cancelled.insert(requestId);
            return false;
        }
        stop = std::move(call->second);
        e.inFlight.erase(call);
    }
    if (stop) stop();
    return true;
}

}  // namespace airlock::mcp

#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

namespace airlock::mcp {

// MCP's Streamable HTTP sessions (Mcp-Session-Id): each belongs to the key
// that opened it (another key's id is unknown to it), ends on DELETE or
// after it was idle too long, and knows its calls in flight so a
// notifications/cancelled, which arrives on another connection, stops the
// right one. Bounded: past its share a key's least recently used session
// goes; every map is capped.
class McpSessions {
  public:
    struct Limits {
        std::chrono::seconds idle{3600};
        std::size_t perKey = 32;
        std::size_t total = 4096;
        std::size_t inFlightPerSession = 64;
    };
    struct Session {
        std::string id, keyId, protocolVersion;
    };
    using Clock = std::chrono::steady_clock;

    McpSessions() : McpSessions(Limits{}) {}
    explicit McpSessions(Limits limits) : limits_(limits) {}

    // A new session's id: 32 random hex digits.
    std::string open(const std::string& keyId, const std::string& protocolVersion,
                     Clock::time_point now = Clock::now());
    // The key's live session by id (used now); nullopt when unknown, ended,
    // expired or another key's.
    std::optional<Session> find(const std::string& id, const std::string& keyId,
                                Clock::time_point now = Clock::now());
    // Ends it, cancelling its calls in flight; false when find would not find it.
    bool close(const std::string& id, const std::string& keyId);
    std::size_t size();
    // Every session ends, its calls cancelled (the server is stopping).
    void closeAll();

    // A call in flight under `requestId` (its JSON text). False (and nothing
    // registered) when that id was cancelled already or the session has too
    // many: the call does not run.
    bool begin(const std::string& sessionId, const std::string& requestId,
               std::function<void()> cancel);
    void end(const std::string& sessionId, const std::string& requestId);
    // Runs the call's cancel (outside the lock) and forgets it; an id not in
    // flight is remembered for a while, so a call that starts after its
    // cancel arrived does not run. True when a call was stopped.
    bool cancel(const std::string& sessionId, const std::string& requestId);

  private:
    struct Entry {
        Session session;
        Clock::time_point used;
        std::map<std::string, std::function<void()>> inFlight;
        std::set<std::string> cancelled;  // tombstones, capped
    };
    void expireLocked(Clock::time_point now);
    std::vector<std::function<void()>> eraseLocked(std::map<std::string, Entry>::iterator it);

    Limits limits_;
    std::mutex mutex_;
    std::map<std::string, Entry> sessions_;
};

}  // namespace airlock::mcp

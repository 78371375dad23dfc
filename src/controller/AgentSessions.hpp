#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "agentclient/AgentConnection.hpp"

namespace airlock {

// One agent session per sandbox (virtio-serial takes one host at a time),
// opened on first use and again after it died. A reconnect is serialised per
// sandbox; callers queue behind it only briefly, and after a failed one they
// fail fast for a while: a guest that does not answer holds no worker per
// request.
class AgentSessions {
  public:
    using Open = std::function<std::shared_ptr<AgentConnection>(const std::string& sandboxId)>;
    // A new session's set-up (protocol-error audit, egress and package
    // listeners); its failure is logged, the session kept.
    using Adopt = std::function<void(const std::string& sandboxId,
                                     const std::shared_ptr<AgentConnection>& agent)>;
    struct Timing {
        std::chrono::milliseconds queueFor{2000};     // behind a reconnect in progress
        std::chrono::milliseconds failFastFor{5000};  // after a failed reconnect
    };
    AgentSessions(Open open, Adopt adopt, Timing timing);
    AgentSessions(Open open, Adopt adopt) : AgentSessions(std::move(open), std::move(adopt), {}) {}
    ~AgentSessions();

    // The sandbox's live session, (re)opened when needed;
    // Error(unavailable) while a reconnect is in progress or failing.
    std::shared_ptr<AgentConnection> get(const std::string& sandboxId);
    // A session opened and set up by its owner (a fresh boot's), replacing
    // any other.
    void install(const std::string& sandboxId, std::shared_ptr<AgentConnection> agent);
    // The sandbox is going away: its session ends, calls still open fail
    // with `why` (Error(conflict)), and so does every get() until drop();
    // nothing reconnects to the VM while it is being destroyed.
    void retire(const std::string& sandboxId, const std::string& why);
    // Forgets a sandbox's session (its VM is gone).
    void drop(const std::string& sandboxId);
    // Ends every session and waits for their threads, which call back into
    // their owners: done before the owners go.
    void closeAll();
    std::size_t live() const;

  private:
    struct Session {
        std::timed_mutex mutex;  // serialises (re)connecting
        std::shared_ptr<AgentConnection> agent;
        std::chrono::steady_clock::time_point retryAfter{};
        std::string lastFailure;
        std::string retired;  // retire()'s reason: no more sessions
    };
    std::shared_ptr<Session> session(const std::string& sandboxId);

    Open open_;
    Adopt adopt_;
    Timing timing_;
    mutable std::mutex mutex_;
    std::map<std::string, std::shared_ptr<Session>> sessions_;
};

}  // namespace airlock

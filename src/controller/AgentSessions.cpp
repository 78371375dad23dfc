#include "controller/AgentSessions.hpp"

#include "core/Error.hpp"
#include "core/Log.hpp"

namespace airlock {

AgentSessions::AgentSessions(Open open, Adopt adopt, Timing timing)
    : open_(std::move(open)), adopt_(std::move(adopt)), timing_(timing) {}

AgentSessions::~AgentSessions() { closeAll(); }

std::shared_ptr<AgentSessions::Session> AgentSessions::session(const std::string& sandboxId) {
    std::lock_guard lock(mutex_);
    auto& s = sessions_[sandboxId];
    if (!s) s = std::make_shared<Session>();
    return s;
}

std::shared_ptr<AgentConnection> AgentSessions::get(const std::string& sandboxId) {
    auto s = session(sandboxId);
    std::unique_lock lock(s->mutex, std::defer_lock);
    if (!lock.try_lock_for(timing_.queueFor))
        throw Error(ErrorCode::unavailable,
                    "the agent of sandbox " + sandboxId + " is reconnecting; retry shortly");
    if (!s->retired.empty()) throw Error(ErrorCode::conflict, s->retired);
    if (s->agent && s->agent->alive()) return s->agent;
    if (std::chrono::steady_clock::now() < s->retryAfter)
        throw Error(ErrorCode::unavailable, "the agent of sandbox " + sandboxId +
                                                " is not answering (" + s->lastFailure +
                                                "); retry in a few seconds");
    // After a controller restart or an agent restart: a new hello starts a
    // clean session (docs/internals.md, "The agent channel").
    if (s->agent) s->agent->close();
    s->agent.reset();
    try {
        s->agent = open_(sandboxId);
        if (!s->agent) throw Error(ErrorCode::internal, "no agent connection was opened");
    } catch (const std::exception& e) {
        s->retryAfter = std::chrono::steady_clock::now() + timing_.failFastFor;
        s->lastFailure = e.what();
        throw;
    }
    if (adopt_) {
        try {
            adopt_(sandboxId, s->agent);
        } catch (const std::exception& e) {
            logError("controller",
                     "setting up the agent session of " + sandboxId + ": " + e.what());
        }
    }
    return s->agent;
}

void AgentSessions::install(const std::string& sandboxId, std::shared_ptr<AgentConnection> agent) {
    auto s = session(sandboxId);
    std::lock_guard lock(s->mutex);
    if (s->agent && s->agent != agent) s->agent->close();
    s->agent = std::move(agent);
    s->retryAfter = {};
}

void AgentSessions::retire(const std::string& sandboxId, const std::string& why) {
    auto s = session(sandboxId);
    std::lock_guard lock(s->mutex);
    s->retired = why;
    if (s->agent) s->agent->close(why);
}

void AgentSessions::drop(const std::string& sandboxId) {
    std::shared_ptr<Session> s;
    {
        std::lock_guard lock(mutex_);
        auto it = sessions_.find(sandboxId);
        if (it == sessions_.end()) return;
        s = std::move(it->second);
        sessions_.erase(it);
    }
    std::lock_guard lock(s->mutex);
    if (s->agent) s->agent->close();
    s->agent.reset();
}

void AgentSessions::closeAll() {
    std::map<std::string, std::shared_ptr<Session>> sessions;
    {
        std::lock_guard lock(mutex_);
        sessions.swap(sessions_);
    }
    for (auto& [id, s] : sessions) {
        std::lock_guard lock(s->mutex);
        if (s->agent) s->agent->closeAndWait();
        s->agent.reset();
    }
}

std::size_t AgentSessions::live() const {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (const auto& [id, s] : sessions_) {
        // One reconnecting is not live; never wait for it here.
        std::unique_lock held(s->mutex, std::try_to_lock);
        if (held.owns_lock() && s->agent && s->agent->alive()) ++n;
    }
    return n;
}

}  // namespace airlock

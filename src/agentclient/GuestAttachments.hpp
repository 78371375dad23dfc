#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agentclient/AgentConnection.hpp"
#include "agentclient/GuestListener.hpp"
#include "core/Error.hpp"
#include "protocol/GuestCalls.hpp"

namespace airlock {

// One sandbox attached to a host service that serves its guest through
// listeners the agent opens there (the egress proxy, the package proxy):
// its agent session, its listeners, its rules and the connections it has
// open. Rules change while connections run, so they are read by copy.
template <class RulesT>
class GuestAttachment {
  public:
    using Rules = RulesT;
    GuestAttachment(std::string id, std::string tenant, std::weak_ptr<AgentConnection> agent,
                    Rules rules)
        : id(std::move(id)), tenant(std::move(tenant)), agent(std::move(agent)),
          rules_(std::move(rules)) {}
    virtual ~GuestAttachment() = default;

    const std::string id;
    const std::string tenant;
    const std::weak_ptr<AgentConnection> agent;
    std::atomic<unsigned> open{0};  // connections counted against the caps

    Rules rules() const {
        std::lock_guard lock(mutex_);
        return rules_;
    }
    void setRules(Rules rules) {
        std::lock_guard lock(mutex_);
        rules_ = std::move(rules);
    }
    // Keeps a listener (by the key its owner names it by) for as long as
    // the attachment lasts.
    void addListener(unsigned key, GuestListener listener) {
        std::lock_guard lock(mutex_);
        listeners_[key] = std::move(listener);
    }
    unsigned guestPort(unsigned key) const {
        std::lock_guard lock(mutex_);
        auto it = listeners_.find(key);
        return it == listeners_.end() ? 0 : it->second.port;
    }
    // Attached through `through` with every listener still open: a new
    // attach of the same session only needs the new rules.
    bool liveThrough(const std::shared_ptr<AgentConnection>& through) const {
        std::lock_guard lock(mutex_);
        if (agent.lock() != through || listeners_.empty() || detached_) return false;
        for (const auto& [_, l] : listeners_)
            if (!l.stream || l.stream->finished()) return false;
        return true;
    }
    // Detached or replaced: judged by empty rules from now on, the listeners
    // close, and connections still running see it at their next request.
    void end() {
        std::map<unsigned, GuestListener> closing;
        {
            std::lock_guard lock(mutex_);
            detached_ = true;
            rules_ = Rules();
            closing.swap(listeners_);
        }
    }
    bool detached() const {
        std::lock_guard lock(mutex_);
        return detached_;
    }
    // The agent stream of a connection one of its listeners accepted (what
    // both proxies' sessions open first); Error(agent_error) when the agent
    // session is gone.
    std::shared_ptr<AgentStream> openConnection(std::uint64_t connection,
                                                AgentStream::Handler handler) const {
        auto session = agent.lock();
        if (!session) throw Error(ErrorCode::agent_error, "agent connection gone");
        return session->open(protocol::EgressAttachRequest{connection}, std::move(handler));
    }

  private:
    mutable std::mutex mutex_;
    Rules rules_;
    std::map<unsigned, GuestListener> listeners_;
    bool detached_ = false;
};

// The attached sandboxes of one such service, by sandbox id: the one
// registry both proxies keep (attach, re-attach after the agent session
// came back, rule updates, detach).
template <class Attachment>
class GuestAttachments {
  public:
    using Rules = typename Attachment::Rules;
    ~GuestAttachments() { clear(); }

    // The rules of a sandbox still attached through `agent`: true when they
    // were all it needed; false when it must be attached anew.
    bool refresh(const std::string& id, const std::shared_ptr<AgentConnection>& agent,
                 const Rules& rules) {
        std::lock_guard lock(mutex_);
        auto it = attached_.find(id);
        if (it == attached_.end() || !it->second->liveThrough(agent)) return false;
        it->second->setRules(rules);
        return true;
    }
    // Adds a newly attached sandbox, ending the attachment it replaces.
    void install(std::shared_ptr<Attachment> attachment) {
        std::shared_ptr<Attachment> previous;
        {
            std::lock_guard lock(mutex_);
            auto& slot = attached_[attachment->id];
            previous = std::exchange(slot, std::move(attachment));
        }
        if (previous) previous->end();
    }
    bool update(const std::string& id, const Rules& rules) {
        auto a = find(id);
        if (a) a->setRules(rules);
        return a != nullptr;
    }
    std::shared_ptr<Attachment> find(const std::string& id) const {
        std::lock_guard lock(mutex_);
        auto it = attached_.find(id);
        return it == attached_.end() ? nullptr : it->second;
    }
    void remove(const std::string& id) {
        std::shared_ptr<Attachment> gone;
        {
            std::lock_guard lock(mutex_);
            auto it = attached_.find(id);
            if (it == attached_.end()) return;
            gone = std::move(it->second);
            attached_.erase(it);
        }
        gone->end();
    }
    void clear() {
        std::map<std::string, std::shared_ptr<Attachment>> all;
        {
            std::lock_guard lock(mutex_);
            all.swap(attached_);
        }
        for (auto& [_, a] : all) a->end();
    }

  private:
    mutable std::mutex mutex_;
    std::map<std::string, std::shared_ptr<Attachment>> attached_;
};

}  // namespace airlock

#include "controller/DecisionWaiters.hpp"

#include "core/Error.hpp"
#include "core/Log.hpp"

namespace airlock {

void DecisionWaiters::add(const std::string& execId, Callback callback) {
    std::lock_guard lock(mutex_);
    waiters_[execId] = std::move(callback);
}

void DecisionWaiters::remove(const std::string& execId) {
    std::lock_guard lock(mutex_);
    waiters_.erase(execId);
}

bool DecisionWaiters::waiting(const std::string& execId) const {
    std::lock_guard lock(mutex_);
    return waiters_.count(execId) > 0;
}

bool DecisionWaiters::notify(const GatedExec& decided) {
    Callback waiter;
    {
        std::lock_guard lock(mutex_);
        auto it = waiters_.find(decided.id);
        if (it == waiters_.end()) return false;
        waiter = std::move(it->second);
        waiters_.erase(it);
    }
    // Outside the lock: the waiter may open the approved exec at once.
    try {
        if (waiter) waiter(decided);
    } catch (const std::exception& e) {
        logError("controller", std::string("decision callback: ") + e.what());
    }
    return true;
}

void DecisionWaiters::start(const std::string& execId) {
    std::lock_guard lock(mutex_);
    if (!started_.insert(execId).second)
        throw Error(ErrorCode::conflict, "exec " + execId + " was already started");
}

void DecisionWaiters::finished(const std::string& execId) {
    std::lock_guard lock(mutex_);
    started_.erase(execId);
}

}  // namespace airlock

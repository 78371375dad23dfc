#pragma once
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "store/GatedExecStore.hpp"

namespace airlock {

// Streamed execs parked for a human: the client waiting for each decision
// (by exec id), and the approved ones already started (each runs once).
class DecisionWaiters {
  public:
    using Callback = std::function<void(const GatedExec&)>;
    void add(const std::string& execId, Callback callback);
    void remove(const std::string& execId);
    bool waiting(const std::string& execId) const;
    // Hands the decision to its waiter (called outside the lock, exceptions
    // logged) and forgets it; false when nobody waits.
    bool notify(const GatedExec& decided);
    // Error(conflict) when this approved exec was started already.
    void start(const std::string& execId);
    void finished(const std::string& execId);

  private:
    mutable std::mutex mutex_;
    std::map<std::string, Callback> waiters_;
    std::set<std::string> started_;
};

}  // namespace airlock

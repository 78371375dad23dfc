#pragma once
#include <functional>
#include <mutex>
#include <string>

#include "store/SandboxStore.hpp"

namespace airlock {

// What other services ask of a sandbox's life without the lifecycle
// knowing them: the workspace service's write scope (checked on every
// write through the files API), the evidence service's last bundle before
// a delete and its clean-up after, the fleet's record of where it lives. Their owners set and clear them while
// calls run, so each call copies its hook under the lock and runs it
// outside.
class SandboxHooks {
  public:
    using WriteGuard = std::function<void(const SandboxRecord&, const std::string& path)>;
    using BeforeDelete = std::function<void(const SandboxRecord&)>;
    using AfterDelete = std::function<void(const std::string& sandboxId)>;
    using Placed = std::function<void(const SandboxRecord&)>;

    void setWriteGuard(WriteGuard guard);
    void setDeleteHooks(BeforeDelete before, AfterDelete after);
    // The fleet's directory: a new sandbox is recorded before its create
    // answers (a failure fails the create), a deleted one forgotten.
    void setPlacementHooks(Placed placed, AfterDelete gone);
    // The guard's refusal (Error(forbidden)) is the write's answer.
    void checkWrite(const SandboxRecord& r, const std::string& path) const;
    // A failure is logged and never thrown: the delete goes on.
    void beforeDelete(const SandboxRecord& r) const;
    void afterDelete(const std::string& sandboxId) const;
    // Throws what the hook threw: the caller undoes the create.
    void placed(const SandboxRecord& r) const;

  private:
    template <class Hook>
    Hook copyOf(const Hook& hook) const {
        std::lock_guard lock(mutex_);
        return hook;
    }

    mutable std::mutex mutex_;
    WriteGuard writeGuard_;
    BeforeDelete before_;
    AfterDelete after_;
    Placed placed_;
    AfterDelete gone_;
};

}  // namespace airlock

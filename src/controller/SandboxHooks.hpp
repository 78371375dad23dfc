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
    // A workspace that moves with its sandbox: the host's commits packed
    // (false: none), and made whole on the new node.
    using PackWorkspace = std::function<bool(const SandboxRecord&, const std::string& packPath)>;
    using ArriveWorkspace = std::function<void(const SandboxRecord&, const std::string& recordJson,
                                               const std::string& packPath)>;

    void setWriteGuard(WriteGuard guard);
    void setDeleteHooks(BeforeDelete before, AfterDelete after);
    // The fleet's directory: a new sandbox is recorded before its create
    // answers (a failure fails the create), a deleted one forgotten.
    void setPlacementHooks(Placed placed, AfterDelete gone);
    void setWorkspaceTravel(PackWorkspace pack, ArriveWorkspace arrive);
    // The guard's refusal (Error(forbidden)) is the write's answer.
    void checkWrite(const SandboxRecord& r, const std::string& path) const;
    // A failure is logged and never thrown: the delete goes on.
    void beforeDelete(const SandboxRecord& r) const;
    void afterDelete(const std::string& sandboxId) const;
    // Throws what the hook threw: the caller undoes the create.
    void placed(const SandboxRecord& r) const;
    // Error(conflict) when no workspace service runs here; else what it threw.
    bool packWorkspace(const SandboxRecord& r, const std::string& packPath) const;
    void arriveWorkspace(const SandboxRecord& r, const std::string& recordJson,
                         const std::string& packPath) const;

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
    PackWorkspace pack_;
    ArriveWorkspace arrive_;
};

}  // namespace airlock

#include "controller/SandboxHooks.hpp"

#include "core/Log.hpp"

namespace airlock {

void SandboxHooks::setWriteGuard(WriteGuard guard) {
    std::lock_guard lock(mutex_);
    writeGuard_ = std::move(guard);
}

void SandboxHooks::setDeleteHooks(BeforeDelete before, AfterDelete after) {
    std::lock_guard lock(mutex_);
    before_ = std::move(before);
    after_ = std::move(after);
}

void SandboxHooks::checkWrite(const SandboxRecord& r, const std::string& path) const {
    WriteGuard guard;
    {
        std::lock_guard lock(mutex_);
        guard = writeGuard_;
    }
    if (guard) guard(r, path);
}

void SandboxHooks::beforeDelete(const SandboxRecord& r) const {
    BeforeDelete hook;
    {
        std::lock_guard lock(mutex_);
        hook = before_;
    }
    if (!hook) return;
    try {
        hook(r);
    } catch (const std::exception& e) {
        logError("controller", "before deleting " + r.id + ": " + e.what());
    }
}

void SandboxHooks::afterDelete(const std::string& sandboxId) const {
    AfterDelete hook;
    {
        std::lock_guard lock(mutex_);
        hook = after_;
    }
    if (!hook) return;
    try {
        hook(sandboxId);
    } catch (const std::exception& e) {
        logError("controller", "after deleting " + sandboxId + ": " + e.what());
    }
}

}  // namespace airlock

#include "controller/SandboxHooks.hpp"

#include "core/Error.hpp"
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

void SandboxHooks::setPlacementHooks(Placed placed, AfterDelete gone) {
    std::lock_guard lock(mutex_);
    placed_ = std::move(placed);
    gone_ = std::move(gone);
}

void SandboxHooks::setWorkspaceTravel(PackWorkspace pack, ArriveWorkspace arrive) {
    std::lock_guard lock(mutex_);
    pack_ = std::move(pack);
    arrive_ = std::move(arrive);
}

namespace {

// A delete hook's failure is logged: the delete goes on.
template <class Hook, class Arg>
void runLogged(const Hook& hook, const Arg& arg, const std::string& what) {
    if (!hook) return;
    try {
        hook(arg);
    } catch (const std::exception& e) {
        logError("controller", what + ": " + e.what());
    }
}

}  // namespace

// Each hook is copied under the lock and run outside it: a hook may set the
// hooks again.
void SandboxHooks::checkWrite(const SandboxRecord& r, const std::string& path) const {
    auto guard = copyOf(writeGuard_);
    if (guard) guard(r, path);
}

void SandboxHooks::beforeDelete(const SandboxRecord& r) const {
    runLogged(copyOf(before_), r, "before deleting " + r.id);
}

void SandboxHooks::afterDelete(const std::string& sandboxId) const {
    runLogged(copyOf(after_), sandboxId, "after deleting " + sandboxId);
    runLogged(copyOf(gone_), sandboxId, "forgetting " + sandboxId + " in the fleet");
}

void SandboxHooks::placed(const SandboxRecord& r) const {
    auto hook = copyOf(placed_);
    if (hook) hook(r);
}

bool SandboxHooks::packWorkspace(const SandboxRecord& r, const std::string& packPath) const {
    auto hook = copyOf(pack_);
    if (!hook)
        throw Error(ErrorCode::conflict, "sandbox " + r.id +
                                             " has a repository workspace and no workspace "
                                             "service runs on this node");
    return hook(r, packPath);
}

void SandboxHooks::arriveWorkspace(const SandboxRecord& r, const std::string& recordJson,
                                   const std::string& packPath) const {
    auto hook = copyOf(arrive_);
    if (!hook)
        throw Error(ErrorCode::conflict, "sandbox " + r.id +
                                             " brings a repository workspace and no workspace "
                                             "service runs on this node");
    hook(r, recordJson, packPath);
}

}  // namespace airlock

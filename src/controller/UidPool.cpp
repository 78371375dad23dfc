#include "controller/UidPool.hpp"

#include "core/Error.hpp"

namespace airlock {

std::uint32_t UidPool::acquire() {
    std::lock_guard lock(mutex_);
    for (std::uint32_t uid = base_; uid < base_ + count_; ++uid)
        if (used_.insert(uid).second) return uid;
    throw Error(ErrorCode::unavailable,
                "all " + std::to_string(count_) + " sandbox uids are in use (--qemu-uid-range)");
}

void UidPool::markUsed(std::uint32_t uid) {
    std::lock_guard lock(mutex_);
    if (uid >= base_ && uid < base_ + count_) used_.insert(uid);
}

void UidPool::release(std::uint32_t uid) {
    std::lock_guard lock(mutex_);
    used_.erase(uid);
}

std::size_t UidPool::inUse() const {
    std::lock_guard lock(mutex_);
    return used_.size();
}

}  // namespace airlock

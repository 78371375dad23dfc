#include "api/TenantLimiter.hpp"

#include "core/Error.hpp"

namespace airlock::api {

TenantLimiter::Slot TenantLimiter::acquire(const std::string& tenant) {
    {
        std::lock_guard lock(state_->mutex);
        auto& n = state_->inUse[tenant];
        if (n >= perTenant_)
            throw Error(ErrorCode::too_many_requests,
                        "this tenant has " + std::to_string(n) +
                            " requests and streams in flight (the limit); retry when some end");
        ++n;
    }
    return Slot(static_cast<void*>(state_.get()), [state = state_, tenant](void*) {
        std::lock_guard lock(state->mutex);
        auto it = state->inUse.find(tenant);
        if (it != state->inUse.end() && --it->second == 0) state->inUse.erase(it);
    });
}

std::size_t TenantLimiter::inUse(const std::string& tenant) const {
    std::lock_guard lock(state_->mutex);
    auto it = state_->inUse.find(tenant);
    return it == state_->inUse.end() ? 0 : it->second;
}

std::shared_ptr<void> ConnectionCounter::tryAcquire() {
    {
        std::lock_guard lock(state_->mutex);
        if (state_->open >= max_) return nullptr;
        ++state_->open;
    }
    return std::shared_ptr<void>(static_cast<void*>(state_.get()), [state = state_](void*) {
        std::lock_guard lock(state->mutex);
        --state->open;
    });
}

std::size_t ConnectionCounter::open() const {
    std::lock_guard lock(state_->mutex);
    return state_->open;
}

}  // namespace airlock::api

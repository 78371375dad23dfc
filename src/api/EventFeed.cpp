#include "api/EventFeed.hpp"

#include <vector>

namespace airlock::api {

std::shared_ptr<void> EventFeed::subscribe(Waker waker) {
    std::uint64_t id;
    {
        std::lock_guard lock(mutex_);
        id = next_++;
        wakers_.emplace(id, std::move(waker));
    }
    return std::shared_ptr<void>(nullptr, [this, id](void*) {
        std::lock_guard lock(mutex_);
        wakers_.erase(id);
    });
}

void EventFeed::notify() {
    std::vector<Waker> wake;
    {
        std::lock_guard lock(mutex_);
        wake.reserve(wakers_.size());
        for (const auto& [id, w] : wakers_) wake.push_back(w);
    }
    // Outside the lock: a waker may drop its own subscription.
    for (const auto& w : wake) w();
}

std::size_t EventFeed::subscribers() {
    std::lock_guard lock(mutex_);
    return wakers_.size();
}

}  // namespace airlock::api

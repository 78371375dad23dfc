#include "core/TimerQueue.hpp"

#include "core/Log.hpp"

namespace airlock {

TimerQueue::TimerQueue() : thread_([this] { run(); }) {}

TimerQueue::~TimerQueue() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        timers_.clear();
        deadlines_.clear();
    }
    cv_.notify_all();
    thread_.join();
}

TimerQueue::Id TimerQueue::schedule(Clock::time_point deadline, std::function<void()> callback) {
    Id id;
    {
        std::lock_guard lock(mutex_);
        id = nextId_++;
        timers_.emplace(std::make_pair(deadline, id), std::move(callback));
        deadlines_.emplace(id, deadline);
    }
    cv_.notify_all();
    return id;
}

bool TimerQueue::cancel(Id id) {
    {
        std::lock_guard lock(mutex_);
        auto it = deadlines_.find(id);
        if (it == deadlines_.end()) return false;
        timers_.erase({it->second, id});
        deadlines_.erase(it);
    }
    cv_.notify_all();  // the runner may be waiting for the one just cancelled
    return true;
}

std::size_t TimerQueue::pending() const {
    std::lock_guard lock(mutex_);
    return timers_.size();
}

void TimerQueue::run() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
        if (timers_.empty()) {
            cv_.wait(lock);
            continue;
        }
        auto first = timers_.begin();
        // A copy: the node may be erased (cancel, destruction) while we wait.
        const Clock::time_point deadline = first->first.first;
        if (Clock::now() < deadline) {
            cv_.wait_until(lock, deadline);
            continue;
        }
        auto callback = std::move(first->second);
        deadlines_.erase(first->first.second);
        timers_.erase(first);
        lock.unlock();
        try {
            callback();
        } catch (const std::exception& e) {
            logError("timer", std::string("timer callback: ") + e.what());
        } catch (...) {
            logError("timer", "timer callback: unknown exception");
        }
        lock.lock();
    }
}

}  // namespace airlock

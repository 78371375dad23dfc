#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace airlock {

// One thread that runs short callbacks at their deadlines (exec timeouts,
// so that no thread waits for a command to end). Callbacks must not block;
// an exception from one is logged and dropped.
class TimerQueue {
public:
    using Clock = std::chrono::steady_clock;
    using Id = std::uint64_t;

    TimerQueue();
    ~TimerQueue();  // pending callbacks are dropped, not run
    TimerQueue(const TimerQueue&) = delete;
    TimerQueue& operator=(const TimerQueue&) = delete;

    Id schedule(Clock::time_point deadline, std::function<void()> callback);
    // True when the callback was still pending (it will not run).
    bool cancel(Id id);
    std::size_t pending() const;

private:
    void run();

    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::map<std::pair<Clock::time_point, Id>, std::function<void()>> timers_;
    std::map<Id, Clock::time_point> deadlines_;
    Id nextId_ = 1;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace airlock

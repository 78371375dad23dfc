#include "core/TimerQueue.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

namespace airlock {
namespace {
using namespace std::chrono_literals;

TEST(TimerQueue, RunsCallbacksInDeadlineOrder) {
    TimerQueue timers;
    std::mutex mutex;
    std::vector<int> order;
    std::promise<void> last;
    auto now = TimerQueue::Clock::now();
    timers.schedule(now + 150ms, [&] {
        std::lock_guard lock(mutex);
        order.push_back(3);
        last.set_value();
    });
    timers.schedule(now + 50ms, [&] {
        std::lock_guard lock(mutex);
        order.push_back(1);
    });
    timers.schedule(now + 100ms, [&] {
        std::lock_guard lock(mutex);
        order.push_back(2);
    });
    ASSERT_EQ(last.get_future().wait_for(5s), std::future_status::ready);
    std::lock_guard lock(mutex);
    EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(TimerQueue, CancelledCallbacksNeverRunAndThrowingOnesDoNotStopTheQueue) {
    TimerQueue timers;
    std::atomic<bool> cancelledRan{false};
    auto id = timers.schedule(TimerQueue::Clock::now() + 50ms, [&] { cancelledRan = true; });
    EXPECT_TRUE(timers.cancel(id));
    EXPECT_FALSE(timers.cancel(id)) << "a second cancel finds nothing";
    timers.schedule(TimerQueue::Clock::now() + 10ms, [] { throw std::runtime_error("boom"); });
    std::promise<void> after;
    timers.schedule(TimerQueue::Clock::now() + 100ms, [&] { after.set_value(); });
    ASSERT_EQ(after.get_future().wait_for(5s), std::future_status::ready);
    EXPECT_FALSE(cancelledRan);
    EXPECT_EQ(timers.pending(), 0u);
}

TEST(TimerQueue, DestructionDropsFarDeadlinesWithoutWaiting) {
    auto started = std::chrono::steady_clock::now();
    {
        TimerQueue timers;
        for (int i = 0; i < 1000; ++i) timers.schedule(TimerQueue::Clock::now() + 24h, [] {});
        EXPECT_EQ(timers.pending(), 1000u);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
}

}  // namespace
}  // namespace airlock

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "daemon/Housekeeping.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

using namespace std::chrono_literals;

TEST(Housekeeping, OneOffTasksRunFirstInOrderThenPeriodicOnes) {
    std::mutex m;
    std::vector<std::string> seen;
    auto note = [&](const std::string& s) {
        std::lock_guard l(m);
        seen.push_back(s);
    };
    Housekeeping h("test");
    h.once("a", [&] { note("a"); });
    h.once("b", [&] { note("b"); });
    h.every(10ms, "tick", [&] { note("tick"); });
    h.start();
    ASSERT_TRUE(test::waitFor(
        [&] {
            std::lock_guard l(m);
            return seen.size() >= 5;
        },
        std::chrono::seconds(10)));
    h.stop();
    std::lock_guard l(m);
    EXPECT_EQ(seen[0], "a");
    EXPECT_EQ(seen[1], "b");
    for (std::size_t i = 2; i < seen.size(); ++i) EXPECT_EQ(seen[i], "tick");
}

TEST(Housekeeping, EachTaskKeepsItsOwnInterval) {
    std::atomic<int> fast{0}, slow{0};
    Housekeeping h("test");
    h.every(5ms, "fast", [&] { ++fast; });
    h.every(1h, "slow", [&] { ++slow; });
    h.start();
    ASSERT_TRUE(test::waitFor([&] { return fast >= 20; }, std::chrono::seconds(10)));
    h.stop();
    EXPECT_EQ(slow.load(), 1) << "ran once at the start, then waits its hour";
}

TEST(Housekeeping, AThrowingTaskIsLoggedAndTheOthersGoOn) {
    std::atomic<int> throws{0}, runs{0};
    Housekeeping h("test");
    h.once("boom", [] { throw std::runtime_error("boom"); });
    h.every(5ms, "throws", [&] {
        ++throws;
        throw 42;
    });
    h.every(5ms, "runs", [&] { ++runs; });
    h.start();
    EXPECT_TRUE(test::waitFor([&] { return throws >= 3 && runs >= 3; }, std::chrono::seconds(10)));
}

TEST(Housekeeping, StopWakesItAtOnceAndSkipsWhatIsLeft) {
    std::atomic<bool> started{false}, second{false};
    Housekeeping h("test");
    h.once("first", [&] { started = true; });
    h.every(1h, "hourly", [] {});
    h.start();
    ASSERT_TRUE(test::waitFor([&] { return started.load(); }, std::chrono::seconds(10)));
    auto before = std::chrono::steady_clock::now();
    h.stop();
    EXPECT_LT(std::chrono::steady_clock::now() - before, 2s);

    Housekeeping never("test");
    never.once("blocks", [&] { std::this_thread::sleep_for(50ms); });
    never.once("second", [&] { second = true; });
    never.start();
    never.stop();  // while the first one runs or before it starts
    EXPECT_FALSE(second.load());
}

}  // namespace
}  // namespace airlock

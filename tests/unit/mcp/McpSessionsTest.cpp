#include "mcp/McpSessions.hpp"

#include <gtest/gtest.h>

namespace airlock::mcp {
namespace {
using namespace std::chrono_literals;

TEST(McpSessions, ASessionIsItsKeysAloneUntilItEndsOrIdlesOut) {
    McpSessions::Limits limits;
    limits.idle = 60s;
    McpSessions sessions(limits);
    auto t0 = McpSessions::Clock::now();
    auto id = sessions.open("key-a", "2025-11-25", t0);
    EXPECT_EQ(id.size(), 32u);
    EXPECT_NE(sessions.open("key-a", "2025-11-25", t0), id) << "random, never reused";
    auto found = sessions.find(id, "key-a", t0 + 30s);
    ASSERT_TRUE(found);
    EXPECT_EQ(found->protocolVersion, "2025-11-25");
    EXPECT_FALSE(sessions.find(id, "key-b", t0 + 30s)) << "another key's id is unknown to it";
    EXPECT_FALSE(sessions.close(id, "key-b"));
    EXPECT_TRUE(sessions.find(id, "key-a", t0 + 80s)) << "used at 30 s: idle for 50 s only";
    EXPECT_FALSE(sessions.find(id, "key-a", t0 + 150s)) << "idle past a minute";
    auto other = sessions.open("key-a", "2025-06-18");
    EXPECT_TRUE(sessions.close(other, "key-a"));
    EXPECT_FALSE(sessions.find(other, "key-a"));
}

TEST(McpSessions, AKeyPastItsShareLosesItsLeastRecentlyUsedSession) {
    McpSessions::Limits limits;
    limits.perKey = 2;
    McpSessions sessions(limits);
    auto t0 = McpSessions::Clock::now();
    auto first = sessions.open("k", "v", t0);
    auto second = sessions.open("k", "v", t0 + 1s);
    sessions.find(first, "k", t0 + 2s);
    auto third = sessions.open("k", "v", t0 + 3s);
    EXPECT_TRUE(sessions.find(first, "k", t0 + 4s));
    EXPECT_FALSE(sessions.find(second, "k", t0 + 4s));
    EXPECT_TRUE(sessions.find(third, "k", t0 + 4s));
    sessions.open("other", "v", t0 + 5s);
    EXPECT_EQ(sessions.size(), 3u) << "another key's share is its own";
}

TEST(McpSessions, ACancelStopsTheCallInFlightOrOneThatStartsAfterIt) {
    McpSessions sessions;
    auto id = sessions.open("k", "v");
    int stopped = 0;
    ASSERT_TRUE(sessions.begin(id, "7", [&] { ++stopped; }));
    EXPECT_FALSE(sessions.begin(id, "7", [] {})) << "one call per id";
    EXPECT_TRUE(sessions.cancel(id, "7"));
    EXPECT_EQ(stopped, 1);
    EXPECT_FALSE(sessions.cancel(id, "7")) << "once";
    // The cancel came first (another connection): the call never runs.
    EXPECT_FALSE(sessions.cancel(id, "8"));
    EXPECT_FALSE(sessions.begin(id, "8", [] {}));
    ASSERT_TRUE(sessions.begin(id, "9", [&] { ++stopped; }));
    sessions.end(id, "9");
    EXPECT_FALSE(sessions.cancel(id, "9")) << "finished: nothing to stop";
    ASSERT_TRUE(sessions.begin(id, "10", [&] { ++stopped; }));
    EXPECT_TRUE(sessions.close(id, "k"));
    EXPECT_EQ(stopped, 2) << "a session that ends stops its calls";
}

TEST(McpSessions, ClosingAllStopsEveryCallInFlight) {
    McpSessions sessions;
    int stopped = 0;
    auto a = sessions.open("k1", "v");
    auto b = sessions.open("k2", "v");
    ASSERT_TRUE(sessions.begin(a, "1", [&] { ++stopped; }));
    ASSERT_TRUE(sessions.begin(b, "1", [&] { ++stopped; }));
    sessions.closeAll();
    EXPECT_EQ(stopped, 2);
    EXPECT_EQ(sessions.size(), 0u);
}

TEST(McpSessions, ASessionWithACallRunningDoesNotIdleOut) {
    McpSessions::Limits limits;
    limits.idle = 1s;
    McpSessions sessions(limits);
    auto t0 = McpSessions::Clock::now();
    auto id = sessions.open("k", "v", t0);
    ASSERT_TRUE(sessions.begin(id, "1", [] {}));
    EXPECT_TRUE(sessions.find(id, "k", t0 + 10min));
}

}  // namespace
}  // namespace airlock::mcp

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <list>

#include "controller/AgentSessions.hpp"
#include "core/Error.hpp"
#include "support/InProcessAgent.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
using namespace std::chrono_literals;

namespace {
using test::codeOf;
}  // namespace

TEST(AgentSessions, OneLiveSessionPerSandboxReopenedAfterItDies) {
    std::list<test::InProcessAgent> guests;
    std::atomic<int> opened{0}, adopted{0};
    AgentSessions sessions(
        [&](const std::string&) {
            ++opened;
            return guests.emplace_back().connect();
        },
        [&](const std::string& id, const std::shared_ptr<AgentConnection>&) {
            EXPECT_EQ(id, "sbx-a");
            ++adopted;
        });
    auto first = sessions.get("sbx-a");
    EXPECT_EQ(sessions.get("sbx-a"), first);
    EXPECT_EQ(opened, 1);
    EXPECT_EQ(adopted, 1);
    EXPECT_EQ(sessions.live(), 1u);
    // The guest's agent goes away: the next call opens a new session.
    guests.clear();
    ASSERT_TRUE(test::waitFor([&] { return !first->alive(); }, 10s, 10ms));
    EXPECT_EQ(sessions.live(), 0u);
    auto second = sessions.get("sbx-a");
    EXPECT_NE(second, first);
    EXPECT_TRUE(second->alive());
    EXPECT_EQ(adopted, 2);
    sessions.retire("sbx-a", "sandbox sbx-a is gone: it was deleted");
    EXPECT_FALSE(second->alive()) << "a retired session stays open";
    EXPECT_EQ(sessions.live(), 0u);
    // Nothing reconnects to a sandbox being removed.
    try {
        sessions.get("sbx-a");
        FAIL() << "reconnected to a retired sandbox";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::conflict);
        EXPECT_STREQ(e.what(), "sandbox sbx-a is gone: it was deleted");
    }
    EXPECT_EQ(opened, 2);
    sessions.drop("sbx-a");
    EXPECT_TRUE(sessions.get("sbx-a")->alive()) << "a new sandbox of that id is a new session";
    EXPECT_EQ(opened, 3);
}

TEST(AgentSessions, AfterAFailedOpenCallersFailFastUntilTheWaitIsOver) {
    std::atomic<int> attempts{0};
    AgentSessions sessions(
        [&](const std::string&) -> std::shared_ptr<AgentConnection> {
            ++attempts;
            throw Error(ErrorCode::agent_timeout, "no hello");
        },
        nullptr, AgentSessions::Timing{2000ms, 300ms});
    EXPECT_EQ(codeOf([&] { sessions.get("sbx-a"); }), ErrorCode::agent_timeout);
    // Within the wait: refused without another attempt, the reason given.
    for (int i = 0; i < 5; ++i) {
        try {
            sessions.get("sbx-a");
            FAIL() << "opened";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::unavailable);
            EXPECT_NE(std::string(e.what()).find("no hello"), std::string::npos) << e.what();
        }
    }
    EXPECT_EQ(attempts, 1);
    // Other sandboxes are not held back.
    EXPECT_EQ(codeOf([&] { sessions.get("sbx-b"); }), ErrorCode::agent_timeout);
    EXPECT_TRUE(test::waitFor(
        [&] {
            codeOf([&] { sessions.get("sbx-a"); });
            return attempts >= 3;
        },
        5s, 50ms));
}

TEST(AgentSessions, CallersQueueBehindAReconnectOnlyBriefly) {
    std::promise<void> release;
    auto released = release.get_future().share();
    std::promise<void> entered;
    test::InProcessAgent guest;
    AgentSessions sessions(
        [&](const std::string&) {
            entered.set_value();
            released.wait();
            return guest.connect();
        },
        nullptr, AgentSessions::Timing{200ms, 5000ms});
    auto slow = std::async(std::launch::async, [&] { return sessions.get("sbx-a"); });
    entered.get_future().wait();
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(codeOf([&] { sessions.get("sbx-a"); }), ErrorCode::unavailable);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
    release.set_value();
    auto agent = slow.get();
    EXPECT_EQ(sessions.get("sbx-a"), agent) << "the reconnect's session was not kept";
}

TEST(AgentSessions, AFailingSetUpKeepsTheSessionAndInstallReplacesIt) {
    test::InProcessAgent a, b;
    AgentSessions sessions([&](const std::string&) { return a.connect(); },
                           [](const std::string&, const std::shared_ptr<AgentConnection>&) {
                               throw std::runtime_error("egress listener refused");
                           });
    auto first = sessions.get("sbx-a");
    EXPECT_TRUE(first->alive());
    auto fresh = b.connect();
    sessions.install("sbx-a", fresh);
    EXPECT_EQ(sessions.get("sbx-a"), fresh);
    EXPECT_FALSE(first->alive()) << "the replaced session was left open";
    sessions.closeAll();
    EXPECT_FALSE(fresh->alive());
    EXPECT_EQ(sessions.live(), 0u);
}

}  // namespace airlock

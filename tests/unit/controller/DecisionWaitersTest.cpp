#include <gtest/gtest.h>

#include "controller/DecisionWaiters.hpp"
#include "core/Error.hpp"

namespace airlock {

TEST(DecisionWaiters, EachDecisionReachesItsWaiterOnce) {
    DecisionWaiters waiters;
    int calls = 0;
    std::string state;
    waiters.add("ex-1", [&](const GatedExec& g) {
        ++calls;
        state = g.state;
    });
    EXPECT_TRUE(waiters.waiting("ex-1"));
    GatedExec decided;
    decided.id = "ex-1";
    decided.state = "approved";
    EXPECT_TRUE(waiters.notify(decided));
    EXPECT_FALSE(waiters.notify(decided)) << "a second decision found a waiter";
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(state, "approved");
    EXPECT_FALSE(waiters.waiting("ex-1"));
}

TEST(DecisionWaiters, AWaiterThatLeftOrThrowsHarmsNothing) {
    DecisionWaiters waiters;
    waiters.add("ex-1", [](const GatedExec&) { ADD_FAILURE() << "called after it left"; });
    waiters.remove("ex-1");
    GatedExec g;
    g.id = "ex-1";
    EXPECT_FALSE(waiters.notify(g));
    waiters.add("ex-2", [](const GatedExec&) { throw std::runtime_error("client gone"); });
    g.id = "ex-2";
    EXPECT_TRUE(waiters.notify(g));  // logged, not thrown
}

TEST(DecisionWaiters, AnApprovedExecStartsOnce) {
    DecisionWaiters waiters;
    waiters.start("ex-1");
    try {
        waiters.start("ex-1");
        FAIL() << "started twice";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::conflict);
    }
    waiters.finished("ex-1");
    EXPECT_NO_THROW(waiters.start("ex-1"));
}

}  // namespace airlock

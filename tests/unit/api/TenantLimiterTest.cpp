#include "api/TenantLimiter.hpp"

#include <gtest/gtest.h>

#include "core/Error.hpp"

namespace airlock::api {
namespace {

TEST(TenantLimiter, EachTenantHasItsOwnLimitAndSlotsComeBack) {
    auto limiter = std::make_unique<TenantLimiter>(2);
    auto a1 = limiter->acquire("acme");
    auto a2 = limiter->acquire("acme");
    try {
        limiter->acquire("acme");
        FAIL() << "a third slot was given";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::too_many_requests);
    }
    EXPECT_NO_THROW(limiter->acquire("globex")) << "one tenant's load refused another";
    auto copy = a1;
    a1.reset();
    EXPECT_EQ(limiter->inUse("acme"), 2u) << "a copy still holds the slot";
    copy.reset();
    EXPECT_EQ(limiter->inUse("acme"), 1u);
    EXPECT_NO_THROW(limiter->acquire("acme"));
    // A slot may outlive the limiter (an exec finishing during shutdown).
    limiter.reset();
    a2.reset();
}

TEST(ConnectionCounter, RefusesBeyondTheCap) {
    ConnectionCounter counter(2);
    auto c1 = counter.tryAcquire();
    auto c2 = counter.tryAcquire();
    EXPECT_TRUE(c1 && c2);
    EXPECT_FALSE(counter.tryAcquire());
    c1.reset();
    EXPECT_EQ(counter.open(), 1u);
    EXPECT_TRUE(counter.tryAcquire());
}

}  // namespace
}  // namespace airlock::api

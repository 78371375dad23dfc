#include <gtest/gtest.h>

#include "controller/TenantExecSlots.hpp"
#include "core/Error.hpp"

namespace airlock {

TEST(TenantExecSlots, ATenantRunsUpToItsLimitAndEachSlotComesBackWithItsLastCopy) {
    TenantExecSlots slots;
    auto one = slots.acquire("acme", 2);
    auto two = slots.acquire("acme", 2);
    EXPECT_EQ(slots.inFlight("acme"), 2u);
    try {
        slots.acquire("acme", 2);
        FAIL() << "a third slot was given";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::quota_exceeded);
        EXPECT_NE(std::string(e.what()).find("concurrent_execs (2 of 2"), std::string::npos);
    }
    // Other tenants and tenants without a limit are not counted against it.
    auto other = slots.acquire("other", 1);
    for (int i = 0; i < 5; ++i) slots.acquire("free", std::nullopt);
    EXPECT_EQ(slots.inFlight("free"), 0u);
    auto copy = one;
    one.reset();
    EXPECT_EQ(slots.inFlight("acme"), 2u) << "released while a copy still holds it";
    copy.reset();
    EXPECT_EQ(slots.inFlight("acme"), 1u);
    auto three = slots.acquire("acme", 2);
    EXPECT_EQ(slots.inFlight("acme"), 2u);
}

TEST(TenantExecSlots, ASlotMayOutliveTheCounter) {
    TenantExecSlots::Slot late;
    {
        TenantExecSlots slots;
        late = slots.acquire("acme", 1);
    }
    late.reset();  // a completion after shutdown: no use after free (ASan)
    SUCCEED();
}

}  // namespace airlock

#include <gtest/gtest.h>

#include "core/KeyedMutexes.hpp"

namespace airlock {

TEST(KeyedMutexes, OneMutexPerKeyUntilForgotten) {
    KeyedMutexes m;
    auto a = m.of("sbx-a");
    EXPECT_EQ(m.of("sbx-a"), a);
    EXPECT_NE(m.of("sbx-b"), a);
    EXPECT_EQ(m.size(), 2u);
    // A holder keeps its mutex through a forget; the key is gone.
    std::lock_guard held(*a);
    m.forget("sbx-a");
    EXPECT_EQ(m.size(), 1u);
    EXPECT_NE(m.of("sbx-a"), a);
}

}  // namespace airlock

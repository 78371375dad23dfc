#include "core/Ids.hpp"

#include <gtest/gtest.h>

#include <set>

namespace airlock {
namespace {

TEST(Ids, SandboxIdsHaveTheDocumentedShape) {
    std::string id = newId("sbx-");
    EXPECT_EQ(id.size(), 24u);
    EXPECT_EQ(id.rfind("sbx-", 0), 0u);
    EXPECT_TRUE(isValidId(id, "sbx-"));
}

TEST(Ids, AreUniqueAcrossManyDraws) {
    std::set<std::string> seen;
    for (int i = 0; i < 10000; ++i) EXPECT_TRUE(seen.insert(newId("sbx-")).second);
}

TEST(Ids, RejectsJunk) {
    EXPECT_FALSE(isValidId("sbx-does-not-exist", "sbx-"));
    EXPECT_FALSE(isValidId("sbx-", "sbx-"));
    EXPECT_FALSE(isValidId("snap-aaaaaaaaaaaaaaaaaaaa", "sbx-"));
    EXPECT_FALSE(isValidId("sbx-AAAAAAAAAAAAAAAAAAAA", "sbx-"));
    EXPECT_FALSE(isValidId("sbx-../../../etc/passwd", "sbx-"));
}

TEST(Ids, UuidIsVersion4) {
    std::string u = newUuid();
    ASSERT_EQ(u.size(), 36u);
    EXPECT_EQ(u[14], '4');
    EXPECT_NE(newUuid(), u);
}

}  // namespace
}  // namespace airlock

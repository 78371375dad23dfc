#include <gtest/gtest.h>

#include <set>
#include <string>

#include "protocol/Ops.hpp"

namespace airlock::protocol {
namespace {

TEST(Ops, EveryOpHasOneNameThatParsesBack) {
    std::set<std::string> names;
    for (int i = 0; i <= static_cast<int>(Op::dir_watch); ++i) {
        auto op = static_cast<Op>(i);
        std::string name(opName(op));
        ASSERT_FALSE(name.empty()) << i;
        EXPECT_TRUE(names.insert(name).second) << name << " twice";
        EXPECT_EQ(parseOp(name), op) << name;
    }
    EXPECT_EQ(names.size(), 20u);
}

TEST(Ops, NamesOutsideTheSetAreNotOps) {
    for (const char* name : {"", "EXEC", "exec ", "format_disk", "process_"})
        EXPECT_FALSE(parseOp(name)) << name;
    EXPECT_FALSE(parseOp(std::string_view("fs\0x", 4))) << "a NUL does not end a name";
    EXPECT_TRUE(isProcessCall(Op::process_stdin));
    EXPECT_FALSE(isProcessCall(Op::process_logs)) << "logs are a stream of their own";
    EXPECT_FALSE(isProcessCall(Op::exec));
}

}  // namespace
}  // namespace airlock::protocol

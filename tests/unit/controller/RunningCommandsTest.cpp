#include <gtest/gtest.h>

#include "controller/RunningCommands.hpp"

namespace airlock {

TEST(RunningCommands, NamesTheSoleCommandOfASandboxOnly) {
    RunningCommands running;
    EXPECT_EQ(running.sole("sbx-a"), "");
    auto npm = running.add("sbx-a", "npm install");
    running.add("sbx-b", "pip install x");
    EXPECT_EQ(running.sole("sbx-a"), "npm install");
    auto make = running.add("sbx-a", "make");
    EXPECT_EQ(running.sole("sbx-a"), "") << "two commands: neither is named";
    running.remove("sbx-a", npm);
    EXPECT_EQ(running.sole("sbx-a"), "make");
    running.remove("sbx-a", make);
    running.remove("sbx-a", make);  // twice: harmless
    EXPECT_EQ(running.sole("sbx-a"), "");
    EXPECT_EQ(running.sole("sbx-b"), "pip install x");
}

}  // namespace airlock

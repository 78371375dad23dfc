#include "store/TaskSpec.hpp"

#include <gtest/gtest.h>

#include "store/SandboxRecord.hpp"

namespace airlock {
namespace {

TEST(TaskSpec, ReadsBackFromItsRecordAsWritten) {
    TaskSpec t;
    t.id = "task-1";
    t.prompt = "fix it";
    t.testCommands = {"npm test"};
    t.sensitivePaths = {"auth/**"};
    SandboxRecord r;
    EXPECT_FALSE(taskOf(r)) << "no task";
    r.taskJson = t.toJson().dump();
    auto back = taskOf(r);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->id, "task-1");
    EXPECT_EQ(back->prompt, "fix it");
    EXPECT_FALSE(back->requestedBy);
    EXPECT_EQ(back->testCommands, t.testCommands);
    EXPECT_EQ(back->sensitivePaths, t.sensitivePaths);
    // The API's shape: absent strings stay absent, the lists are always there.
    EXPECT_FALSE(t.toJson().contains("requested_by"));
    EXPECT_TRUE(TaskSpec().toJson()["test_commands"].is_array());
    for (const char* damaged : {"not json", "[]", "7"}) {
        r.taskJson = damaged;
        EXPECT_FALSE(taskOf(r)) << damaged;
    }
}

TEST(TaskSpec, MaskedHidesASecretInEveryField) {
    SecretMasker masker({"s3cr3t-Value-9137"});
    TaskSpec t;
    t.id = "s3cr3t-Value-9137";
    t.prompt = "use s3cr3t-Value-9137";
    t.requestedBy = "s3cr3t-Value-9137";
    t.testCommands = {"deploy s3cr3t-Value-9137"};
    t.sensitivePaths = {"s3cr3t-Value-9137/**"};
    auto text = t.masked(masker).toJson().dump();
    EXPECT_EQ(text.find("s3cr3t"), std::string::npos) << text;
    EXPECT_NE(text.find("use ***"), std::string::npos) << text;
}

}  // namespace
}  // namespace airlock

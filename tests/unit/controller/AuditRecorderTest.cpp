#include <gtest/gtest.h>

#include "controller/AuditRecorder.hpp"
#include "store/Database.hpp"
#include "support/TestEnv.hpp"

namespace airlock {

TEST(AuditRecorder, RecordsMaskedEventsAndCountsThemByType) {
    test::TempDir dir;
    Database db(dir.path() + "/state.db");
    AuditStore store(db);
    AuditRecorder recorder(store);
    SecretMasker masker({"hunter2"});
    recorder.record("sbx-a", "acme", "exec.allowed", {{"command", "echo hunter2"}}, &masker);
    recorder.record("sbx-a", "acme", "exec.allowed", {{"command", "ls"}});
    recorder.count("egress.denied");
    auto events = store.query("sbx-a", AuditQuery{});
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].dataJson.find("hunter2"), std::string::npos) << events[0].dataJson;
    EXPECT_EQ(events[0].tenant, "acme");
    auto counts = recorder.counts();
    EXPECT_EQ(counts["exec.allowed"], 2u);
    EXPECT_EQ(counts["egress.denied"], 1u);
}

TEST(AuditRecorder, AFailedAppendIsLoggedNotThrown) {
    test::TempDir dir;
    auto db = std::make_unique<Database>(dir.path() + "/state.db");
    AuditStore store(*db);
    AuditRecorder recorder(store);
    db->exec("DROP TABLE audit");
    EXPECT_NO_THROW(recorder.record("sbx-a", "acme", "exec.allowed", nlohmann::json::object()));
    EXPECT_EQ(recorder.counts().count("exec.allowed"), 0u) << "counted what was not recorded";
}

}  // namespace airlock

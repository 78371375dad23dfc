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
    SecretMasker masker({"hunter2-pass"});
    recorder.record("sbx-a", "acme", "exec.allowed", {{"command", "echo hunter2-pass"}}, &masker);
    recorder.record("sbx-a", "acme", "exec.allowed", {{"command", "ls"}});
    recorder.count("egress.denied");
    auto events = store.query("sbx-a", AuditQuery{});
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].dataJson.find("hunter2"), std::string::npos) << events[0].dataJson;
    EXPECT_NE(events[0].dataJson.find("\"masked\":{\"/command\":1}"), std::string::npos)
        << "a masked record says where and how often: " << events[0].dataJson;
    EXPECT_EQ(events[0].tenant, "acme");
    auto counts = recorder.counts();
    EXPECT_EQ(counts["exec.allowed"], 2u);
    EXPECT_EQ(counts["egress.denied"], 1u);
}

TEST(AuditRecorder, RecordIntegrityASecretShapedLikeJsonCannotBreakOrEditARecord) {
    test::TempDir dir;
    Database db(dir.path() + "/state.db");
    AuditStore store(db);
    AuditRecorder recorder(store);
    // Masking the record's text would have turned it into invalid JSON (the
    // bundle then skips the record) or removed its exit code.
    SecretMasker masker({"\"exit_code\":", "exit_code", "approved\"}"});
    recorder.record("sbx-a", "acme", "exec.executed",
                    {{"command", "echo exit_code"}, {"exit_code", 3}, {"decision", "approved"}},
                    &masker);
    auto events = store.query("sbx-a", AuditQuery{});
    ASSERT_EQ(events.size(), 1u);
    auto d = nlohmann::json::parse(events[0].dataJson, nullptr, false);
    ASSERT_TRUE(d.is_object()) << events[0].dataJson;
    EXPECT_EQ(d["exit_code"], 3);
    EXPECT_EQ(d["decision"], "approved");
    EXPECT_EQ(d["command"], "echo ***");
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

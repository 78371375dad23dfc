#include "core/SecretMasker.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace airlock {
namespace {

using json = nlohmann::json;

TEST(SecretMasker, RecordIntegrityASecretCannotRemoveAFieldOrChangeAVerdict) {
    // Secrets an agent would choose to edit the record: a field's name, a
    // decision, a piece of a commit id, a piece of JSON.
    const std::string commit = "0123abcd89ef0123abcd89ef0123abcd89ef0123";
    SecretMasker m({"exit_code", "approved", "0123abcd", "\"decision\":", "tok-Secret-77"});
    json record = {{"exit_code", 1},
                   {"decision", "approved"},
                   {"commit", commit},
                   {"command", "deploy tok-Secret-77 exit_code approved"},
                   {"env", {{"TOKEN", "tok-Secret-77"}, {"LD_PRELOAD", "/tmp/x.so"}}}};
    json masked = maskRecord(record, m);
    EXPECT_EQ(masked["exit_code"], 1);
    EXPECT_EQ(masked["decision"], "approved") << "a verdict is never masked";
    EXPECT_EQ(masked["commit"], commit) << "a digest is never masked";
    EXPECT_EQ(masked["command"], "deploy *** *** ***") << "data is";
    EXPECT_EQ(masked["env"]["TOKEN"], "***");
    EXPECT_EQ(masked["env"]["LD_PRELOAD"], "/tmp/x.so");
    EXPECT_EQ(masked["masked"]["/command"], 3) << "a masked field says how many replacements";
    EXPECT_EQ(masked["masked"]["/env/TOKEN"], 1);
    EXPECT_FALSE(masked["masked"].contains("/decision"));
    // The same secrets over the record's text would have broken it.
    EXPECT_TRUE(json::parse(m.mask(record.dump()), nullptr, false).is_discarded() ||
                m.mask(record.dump()).find("\"exit_code\"") == std::string::npos);
}

TEST(SecretMasker, AVerdictFieldHoldingDataIsStillMasked) {
    SecretMasker m({"tok-Secret-77"});
    // A value with spaces is not a token the host writes: masked.
    json masked = maskRecord({{"result", "leaked tok-Secret-77 here"}, {"id", "tok-Secret-77"}}, m);
    EXPECT_EQ(masked["result"], "leaked *** here");
    EXPECT_EQ(masked["id"], "tok-Secret-77")
        << "an identifier field keeps its token (the host mints ids, not the agent)";
}

TEST(SecretMasker, ShortValuesAreNeverMasked) {
    SecretMasker m({"abc1234"});
    EXPECT_TRUE(m.empty()) << "under 8 bytes a value would blank out ordinary text";
    std::size_t n = 0;
    SecretMasker real({"abcd1234"});
    EXPECT_EQ(real.mask("x abcd1234 y abcd1234", n), "x *** y ***");
    EXPECT_EQ(n, 2u);
}

}  // namespace
}  // namespace airlock

// SandboxCommands on its own: a fake sandbox (FakeSandboxAccess, the real
// agent in this process), real policy, gates, secrets and stores.
#include <gtest/gtest.h>

#include <functional>

#include <filesystem>
#include <future>

#include "controller/SandboxCommands.hpp"
#include "core/AwaitedResult.hpp"
#include "core/Error.hpp"
#include "store/AuditStore.hpp"
#include "store/Database.hpp"
#include "store/SnapshotStore.hpp"
#include "support/FakeSandboxAccess.hpp"
#include "unit/controller/CommandsFixture.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using test::codeOf;

using test::asRootShell;
using test::kScopedToken;

class SandboxCommandsTest : public test::CommandsFixture {};

TEST_F(SandboxCommandsTest, EnvironmentLayersAndScopedSecretsAndMaskedOutput) {
    auto o = asRootShell("echo $FROM_BASE $FROM_SANDBOX $BOTH $OWN len=${#API_TOKEN} $API_TOKEN");
    o.env = {{"BOTH", "command"}, {"OWN", "o"}};
    auto out = commands->exec("t1", id(), o);
    // The sandbox's environment, the command's over it, the secret scoped to
    // "echo *" injected (20 bytes) and masked in what came back.
    EXPECT_EQ(out.stdoutData.find(kScopedToken), std::string::npos) << out.stdoutData;
    EXPECT_EQ(out.stdoutData.rfind("b s command o len=20 ", 0), 0u) << out.stdoutData;
    // Out of its scope: not injected.
    auto other = commands->exec("t1", id(), asRootShell("true; echo len=${#API_TOKEN}"));
    EXPECT_EQ(other.stdoutData, "len=0\n");
    EXPECT_EQ(access.recordsOf("exec.allowed").size(), 2u);
}

TEST_F(SandboxCommandsTest, ARunningCommandIsNamedMaskedWhileItRunsAndForgottenAfter) {
    std::string marker = dir.path() + "/started";
    // The secret's value typed into the command: masked wherever it is named.
    std::string typed = std::string("echo ") + kScopedToken + " > " + marker + "; sleep 3";
    std::promise<std::optional<ExecOutput>> ended;
    auto pending = commands->submitAsync("t1", id(), asRootShell(typed),
                                         [&](std::optional<ExecOutput> out, std::exception_ptr) {
                                             ended.set_value(std::move(out));
                                         });
    ASSERT_FALSE(pending) << "an allowed command is not parked";
    ASSERT_TRUE(test::waitFor([&] { return fs::exists(marker); }, 10s, 10ms));
    EXPECT_EQ(commands->soleRunning(id()), "echo *** > " + marker + "; sleep 3");
    EXPECT_EQ(tenants.usageOf("t1").concurrentExecs, 1u) << "its exec slot is held while it runs";
    auto result = ended.get_future();
    ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
    auto out = result.get();
    ASSERT_TRUE(out);
    EXPECT_EQ(out->result.exit_code, 0);
    EXPECT_EQ(commands->soleRunning(id()), "");
    EXPECT_TRUE(
        test::waitFor([&] { return tenants.usageOf("t1").concurrentExecs == 0; }, 5s, 10ms));
    auto executed = access.recordsOf("exec.executed");
    ASSERT_EQ(executed.size(), 1u);
    EXPECT_EQ(executed[0].data["exit_code"], 0);
    EXPECT_EQ(executed[0].data["command"], "echo *** > " + marker + "; sleep 3");
    EXPECT_FALSE(executed[0].data["exec_id"].get<std::string>().empty());
}

TEST_F(SandboxCommandsTest, DeniedAndGatedCommandsNeverRunOnTheDirectPaths) {
    std::string marker = dir.path() + "/touched";
    EXPECT_EQ(codeOf([&] { commands->submit("t1", id(), asRootShell("echo forbidden")); }),
              ErrorCode::policy_denied);
    // exec() and prepare() (the background processes' door) have no gate
    // to wait at: a command that needs approval is refused there.
    EXPECT_EQ(codeOf([&] { commands->exec("t1", id(), asRootShell("touch " + marker)); }),
              ErrorCode::policy_denied);
    try {
        commands->prepare(access.sandbox, asRootShell("touch " + marker), "processes");
        FAIL() << "prepared a command that needs approval";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::policy_denied);
        EXPECT_NE(std::string(e.what()).find("needs approval"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(marker));
    EXPECT_EQ(access.recordsOf("exec.denied").size(), 3u);
    EXPECT_EQ(codeOf([&] { commands->exec("t2", id(), asRootShell("true")); }),
              ErrorCode::not_found);
    access.sandbox.state = SandboxState::paused;
    EXPECT_EQ(codeOf([&] { commands->submit("t1", id(), asRootShell("true")); }),
              ErrorCode::conflict);
}

TEST_F(SandboxCommandsTest, AParkedCommandRunsOnceApprovedAndItsEndIsAudited) {
    std::string marker = dir.path() + "/approved";
    auto submitted = commands->submit("t1", id(), asRootShell("touch " + marker));
    ASSERT_TRUE(submitted.pending);
    EXPECT_FALSE(submitted.output);
    EXPECT_FALSE(fs::exists(marker)) << "ran before a human decided";
    auto [decided, parked] = gates.decide("t1", submitted.pending->approvalId, true, "ok", "human");
    commands->runApproved(decided);
    // Its end is audited first, then the gate's state is set: wait for the state.
    ASSERT_TRUE(
        test::waitFor([&] { return gates.find(decided.id)->state == "exited"; }, 10s, 10ms));
    EXPECT_TRUE(fs::exists(marker));
    auto executed = access.recordsOf("exec.executed");
    ASSERT_EQ(executed.size(), 1u);
    EXPECT_EQ(executed[0].data["approval_id"], submitted.pending->approvalId);
    EXPECT_EQ(executed[0].data["exec_id"], decided.id);
}

// Attack 11: the request behind an approval is changed after it was parked
// (LD_PRELOAD added to its env, its stdin swapped): approving it runs nothing.
TEST_F(SandboxCommandsTest, ARequestChangedAfterParkingNeverRunsUnderItsApproval) {
    std::string marker = dir.path() + "/approved";
    auto o = asRootShell("touch " + marker + "; cat > " + marker + ".stdin");
    o.stdinData = "approved input";
    std::vector<std::function<void(nlohmann::json&)>> edits{
        [](nlohmann::json& j) { j["env"]["LD_PRELOAD"] = "/tmp/evil.so"; },
        [](nlohmann::json& j) { j["stdin"] = "other input"; }};
    for (const auto& edit : edits) {
        auto submitted = commands->submit("t1", id(), o);
        ASSERT_TRUE(submitted.pending);
        // Changed where it waits, sealed again as the daemon would.
        auto request = secrets.openRequest(*gates.find(submitted.pending->id));
        edit(request);
        db.run("UPDATE gated_execs SET request = ? WHERE id = ?",
               secrets.sealRequest(access.sandbox, request.dump()), submitted.pending->id);
        auto before = access.recordsOf("exec.failed").size();
        auto [decided, parked] =
            gates.decide("t1", submitted.pending->approvalId, true, "ok", "human");
        commands->runApproved(decided);
        ASSERT_TRUE(test::waitFor(
            [&] { return access.recordsOf("exec.failed").size() > before; }, 10s, 10ms));
        EXPECT_FALSE(fs::exists(marker)) << "a request other than the approved one ran";
        EXPECT_EQ(gates.find(decided.id)->state, "failed");
        EXPECT_NE(gates.find(decided.id)->error.find("digest"), std::string::npos)
            << gates.find(decided.id)->error;
    }
    EXPECT_TRUE(access.recordsOf("exec.executed").empty());
}

}  // namespace
}  // namespace airlock

// The host half of a judged terminal: each line the guest's shell asks
// about is judged by the sandbox's policy like an exec, one at a time,
// recorded under the terminal's key, held for approval where the policy
// says so and withdrawn when the terminal goes; a flood waits its turn.
#include "controller/TerminalLines.hpp"

#include <gtest/gtest.h>

#include <boost/asio/thread_pool.hpp>
#include <condition_variable>

#include "ControllerFixture.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
using namespace std::chrono_literals;

class TerminalLinesTest : public test::ControllerFixture {
  protected:
    void SetUp() override {
        CreateSandboxRequest r;
        r.policy.deny = {"rm -rf /tmp/keep*"};
        r.policy.approve = {"echo gated*"};
        sandbox = controller->create("t1", r);
        ExecOptions shell;
        shell.argv = {"bash", "-l"};
        shell.caller = "key:k1 (human, approver)";
        lines = TerminalLines::open(
            controller->commands(), pool, {"t1", sandbox.id, "ex-terminal", shell},
            [this](const protocol::LineVerdict& v) {
                std::lock_guard lock(mutex);
                verdicts.push_back(v);
                cv.notify_all();
            },
            [this](const LineDecision& d) {
                std::lock_guard lock(mutex);
                told.push_back(d.state);
            });
    }
    void TearDown() override {
        lines->close();
        pool.join();
    }
    // The verdicts sent for line `id` once one is final ("allow"/"deny").
    std::vector<protocol::LineVerdict> finalFor(std::uint32_t id) {
        std::unique_lock lock(mutex);
        std::vector<protocol::LineVerdict> of;
        cv.wait_for(lock, 10s, [&] {
            of.clear();
            for (const auto& v : verdicts)
                if (v.id == id) of.push_back(v);
            return !of.empty() && of.back().state != "pending";
        });
        return of;
    }
    std::vector<AuditEvent> recorded() {
        AuditQuery q;
        q.type = "exec.line";
        return controller->audit("t1", sandbox.id, q);
    }

    boost::asio::thread_pool pool{2};
    SandboxRecord sandbox;
    std::shared_ptr<TerminalLines> lines;
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<protocol::LineVerdict> verdicts;
    std::vector<std::string> told;  // what the door heard of held lines
};

TEST_F(TerminalLinesTest, EachLineIsJudgedAndRecordedUnderTheTerminalsKey) {
    lines->onLine({1, "echo hi"});
    auto first = finalFor(1);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].state, "allow");
    lines->onLine({2, "ls; rm -rf /tmp/keep-me"});
    auto second = finalFor(2);
    ASSERT_EQ(second.size(), 1u);
    EXPECT_EQ(second[0].state, "deny");
    EXPECT_NE(second[0].message.find("rm -rf /tmp/keep*"), std::string::npos) << second[0].message;
    lines->onLine({3, "   "});
    EXPECT_EQ(finalFor(3).back().state, "deny") << "an empty line is nothing to run";

    auto events = recorded();
    ASSERT_EQ(events.size(), 3u);
    auto data = nlohmann::json::parse(events[0].dataJson);
    EXPECT_EQ(data["command"], "echo hi");
    EXPECT_EQ(data["by"], "key:k1 (human, approver)");
    EXPECT_EQ(data["terminal"], "ex-terminal");
    EXPECT_EQ(data["reported_by"], "guest shell");
    EXPECT_EQ(data["policy"]["decision"], "allow");
    EXPECT_EQ(nlohmann::json::parse(events[1].dataJson)["policy"]["decision"], "deny");
}

TEST_F(TerminalLinesTest, AGatedLineWaitsForItsApproval) {
    lines->onLine({1, "echo gated-1"});
    ASSERT_TRUE(test::waitFor(
        [&] {
            std::lock_guard lock(mutex);
            return !verdicts.empty() && verdicts[0].state == "pending";
        },
        10s));
    auto pending = controller->gates().pending(TenantScope::only("t1"));
    ASSERT_EQ(pending.size(), 1u);
    EXPECT_EQ(pending[0].command, "echo gated-1");
    controller->decideApproval("t1", pending[0].approvalId, true, "fine", "key:k2");
    auto decided = finalFor(1);
    ASSERT_EQ(decided.size(), 2u);
    EXPECT_EQ(decided.back().state, "allow");
    EXPECT_NE(decided.back().message.find("key:k2"), std::string::npos);

    lines->onLine({3, "echo gated-2"});
    ASSERT_TRUE(test::waitFor(
        [&] {
            std::lock_guard lock(mutex);
            return !verdicts.empty() && verdicts.back().id == 3 && verdicts.back().state == "pending";
        },
        10s));
    auto second = controller->gates().pending(TenantScope::only("t1"))[0];
    controller->decideApproval("t1", second.approvalId, false, "not now", "key:k2");
    EXPECT_EQ(finalFor(3).back().state, "deny");
    std::lock_guard lock(mutex);
    EXPECT_EQ(told, (std::vector<std::string>{"pending", "allow", "pending", "deny"}))
        << "the door hears of held lines only, and of how each was decided";
}

TEST_F(TerminalLinesTest, AShellThatGivesUpOnAHeldLineMovesOn) {
    lines->onLine({1, "echo gated-abandoned"});
    ASSERT_TRUE(test::waitFor(
        [&] { return controller->gates().pending(TenantScope::only("t1")).size() == 1; }, 10s));
    auto held = controller->gates().pending(TenantScope::only("t1"))[0];
    // ^C in the shell: its next line comes while the first is still held.
    lines->onLine({2, "echo next"});
    EXPECT_EQ(finalFor(2).back().state, "allow") << "a shell that gave up on its line is answered at once";
    ASSERT_TRUE(test::waitFor(
        [&] { return controller->gates().approval("t1", held.approvalId).state == "cancelled"; },
        10s));
    std::lock_guard lock(mutex);
    for (const auto& v : verdicts) {
        if (v.id != 1) continue;
        EXPECT_EQ(v.state, "pending") << "the given-up line is never answered";
    }
}

TEST_F(TerminalLinesTest, ALineHeldWhenTheTerminalGoesIsWithdrawn) {
    lines->onLine({1, "echo gated-late"});
    ASSERT_TRUE(test::waitFor([&] { return controller->gates().pending(TenantScope::only("t1")).size() == 1; },
                              10s));
    auto held = controller->gates().pending(TenantScope::only("t1"))[0];
    lines->close();
    ASSERT_TRUE(test::waitFor(
        [&] { return controller->gates().approval("t1", held.approvalId).state == "cancelled"; },
        10s));
    std::size_t before;
    {
        std::lock_guard lock(mutex);
        before = verdicts.size();
    }
    lines->onLine({2, "echo after"});
    pool.join();  // whatever was posted has run
    std::lock_guard lock(mutex);
    EXPECT_EQ(verdicts.size(), before) << "nothing is sent after close()";
}

TEST_F(TerminalLinesTest, AFloodOfLinesWaitsItsTurnAndIsNeverRefused) {
    const auto started = std::chrono::steady_clock::now();
    const std::uint32_t count = static_cast<std::uint32_t>(TerminalLines::kLineBurst) + 5;
    for (std::uint32_t id = 1; id <= count; ++id) {
        lines->onLine({id, "true"});
        ASSERT_EQ(finalFor(id).back().state, "allow") << id;
    }
    // Five beyond the burst at kLinesPerSecond take about half a second.
    EXPECT_GE(std::chrono::steady_clock::now() - started,
              std::chrono::duration<double>(4 / TerminalLines::kLinesPerSecond));
    EXPECT_EQ(recorded().size(), count);
}

}  // namespace
}  // namespace airlock

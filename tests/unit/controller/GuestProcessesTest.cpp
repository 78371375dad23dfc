#include <gtest/gtest.h>

#include <mutex>

#include "controller/GuestProcesses.hpp"
#include "core/Error.hpp"
#include "support/FakeSandboxAccess.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

using namespace std::chrono_literals;

class GuestProcessesTest : public ::testing::Test {
  protected:
    test::FakeSandboxAccess access;
    GuestProcesses processes{access};
    const std::string& id() { return access.sandbox.id; }

    ExecOptions command(const std::string& script) {
        ExecOptions o;
        o.argv = {"/bin/sh", "-c", script};
        o.user = "root";  // the in-process agent runs on the host
        return o;
    }
    protocol::ProcessInfo call(protocol::Op op, const std::string& processId = "") {
        protocol::ProcessCall c;
        c.op = op;
        c.id = processId;
        c.signal = "KILL";
        return processes.call("t1", id(), c);
    }
    std::size_t listed() { return processes.list("t1", id()).processes.size(); }
    static std::string text(const protocol::ProcessInfo& p) {
        return protocol::toJsonValue(p).dump();
    }
};

TEST_F(GuestProcessesTest, AStartThePolicyRefusesNeverReachesTheGuest) {
    access.policyAllows = false;
    auto before = listed();
    EXPECT_EQ(test::codeOf([&] { processes.start("t1", id(), command("sleep 30"), false); }),
              ErrorCode::policy_denied);
    EXPECT_EQ(listed(), before);
    ASSERT_EQ(access.recordsOf("exec.denied").size(), 1u);
    EXPECT_EQ(access.recordsOf("exec.denied")[0].data["path"], "processes");
}

TEST_F(GuestProcessesTest, AStoppedOrForeignSandboxAnswersBeforeThePolicyIsAsked) {
    access.policyAllows = false;
    EXPECT_EQ(test::codeOf([&] { processes.start("t2", id(), command("true"), false); }),
              ErrorCode::not_found);
    access.sandbox.state = SandboxState::paused;
    EXPECT_EQ(test::codeOf([&] { processes.start("t1", id(), command("true"), false); }),
              ErrorCode::conflict);
    EXPECT_TRUE(access.records().empty());
}

TEST_F(GuestProcessesTest, OnlyProcessCallsPassThisDoor) {
    for (auto op : {protocol::Op::exec, protocol::Op::fs, protocol::Op::process_start,
                    protocol::Op::process_list, protocol::Op::process_logs, protocol::Op::tunnel})
        EXPECT_EQ(test::codeOf([&] { call(op); }), ErrorCode::bad_request) << protocol::opName(op);
}

TEST_F(GuestProcessesTest, AProcessGetsItsSecretsAndEverythingItShowsIsMasked) {
    access.secrets = {"s3cr3t-Value-8812"};
    auto started = processes.start(
        "t1", id(), command("echo \"$SECRET_0\"; sleep 30 # s3cr3t-Value-8812"), false);
    EXPECT_EQ(text(started).find("s3cr3t-Value-8812"), std::string::npos) << text(started);
    ASSERT_GT(started.pid, 0u);
    EXPECT_TRUE(started.running);
    std::string pid = std::to_string(started.pid);
    auto one = call(protocol::Op::process_get, pid);
    EXPECT_EQ(one.pid, started.pid);
    EXPECT_EQ(text(one).find("s3cr3t-Value-8812"), std::string::npos) << text(one);
    EXPECT_NE(text(one).find("***"), std::string::npos)
        << "the command is shown, masked: " << text(one);

    // Its log: the secret it was given reached it (it printed it), masked on the way out.
    std::mutex m;
    std::string out;
    bool ended = false;
    auto stream = processes.openLogs("t1", id(), pid, true, [&](AgentStream::Event&& e) {
        std::lock_guard lock(m);
        if (e.kind == AgentStream::Event::Kind::data)
            out += e.payload;
        else if (e.kind != AgentStream::Event::Kind::control)
            ended = true;
    });
    EXPECT_TRUE(test::waitFor(
        [&] {
            std::lock_guard lock(m);
            return out.find("***") != std::string::npos;
        },
        10s))
        << out;
    call(protocol::Op::process_signal, pid);
    EXPECT_TRUE(test::waitFor(
        [&] {
            std::lock_guard lock(m);
            return ended;
        },
        10s));
    std::lock_guard lock(m);
    EXPECT_EQ(out.find("s3cr3t-Value-8812"), std::string::npos) << out;
}

}  // namespace
}  // namespace airlock

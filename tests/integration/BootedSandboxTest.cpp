// Real VMs: the minimal template booted through libvirt (embedded driver) and
// QEMU, reached through the real agent over virtio-serial. One sandbox is
// booted for the whole suite and reused where that is honest.
#include <gtest/gtest.h>
#include <sys/utsname.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "agentclient/AgentConnection.hpp"
#include "controller/SandboxController.hpp"
#include "core/Error.hpp"
#include "hypervisor/AccelProbe.hpp"
#include "hypervisor/LibvirtHypervisor.hpp"
#include "store/Database.hpp"
#include "support/RealWorld.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

ControllerConfig bootedConfig() {
    ControllerConfig config;
    config.execOutputCap = 256 * 1024;
    return config;
}

struct World : test::RealWorld {
    World() : RealWorld(bootedConfig()) {}
    std::string sandboxId;
};

class BootedSandbox : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        ASSERT_TRUE(test::templatesBuilt()) << "run scripts/setup first: no minimal template";
        world = new World;
        world->sandboxId = world->controller->create("t", CreateSandboxRequest{}).id;
    }

    static void TearDownTestSuite() {
        if (!world) return;
        for (const auto& r : world->controller->list("t")) world->controller->destroy("t", r.id);
        delete world;
        world = nullptr;
    }

    static ExecOutput run(const std::string& script, const std::string& user = "user", unsigned timeoutS = 60) {
        ExecOptions o;
        o.shell = script;
        o.user = user;
        o.timeoutS = timeoutS;
        return world->controller->commands().exec("t", world->sandboxId, o);
    }

    static World* world;
};
World* BootedSandbox::world = nullptr;

TEST_F(BootedSandbox, RunsInTheGuestKernelNotTheHost) {
    utsname host{};
    ::uname(&host);
    auto out = run("uname -r; cat /proc/1/comm; hostname");
    EXPECT_EQ(out.result.exit_code, 0) << out.stderrData;
    EXPECT_EQ(out.stdoutData.substr(0, out.stdoutData.find('\n')),
              world->templates->find("minimal")->kernelVersion);
    EXPECT_NE(out.stdoutData.find("init\nairlock\n"), std::string::npos) << out.stdoutData;
    EXPECT_EQ(out.stdoutData.find(std::string(host.release) + "\n"), std::string::npos);
}

TEST_F(BootedSandbox, DefaultUserIsUnprivilegedAndRootIsOptIn) {
    EXPECT_EQ(run("id -u; echo $HOME; pwd").stdoutData, "1000\n/home/user\n/home/user\n");
    EXPECT_EQ(run("id -u", "root").stdoutData, "0\n");
    auto denied = run("cat /dev/vport0p1");
    EXPECT_NE(denied.result.exit_code, 0) << "the unprivileged user must not reach the agent's port";
    // No no-new-privs: a template may give its user sudo, as E2B's base does.
    EXPECT_EQ(run("grep NoNewPrivs /proc/self/status").stdoutData, "NoNewPrivs:\t0\n");
}

TEST_F(BootedSandbox, ExitCodesStderrAndStdin) {
    auto out = run("echo oops >&2; exit 3");
    EXPECT_EQ(out.result.exit_code, 3);
    EXPECT_EQ(out.stderrData, "oops\n");
    ExecOptions o;
    o.argv = {"wc", "-c"};
    o.stdinData = std::string(100000, 'x');
    EXPECT_EQ(world->controller->commands().exec("t", world->sandboxId, o).stdoutData.find("100000"), 0u);
}

TEST_F(BootedSandbox, TimeoutKillsTheProcessGroupInTheGuest) {
    auto out = run("(sleep 4; touch /tmp/survivor) & sleep 60", "user", 1);
    EXPECT_TRUE(out.result.timed_out);
    EXPECT_LT(out.durationMs, 15000);
    ASSERT_TRUE(test::waitFor([] { return run("echo alive").stdoutData == "alive\n"; }, 10s));
    std::this_thread::sleep_for(4500ms);  // past the moment the grandchild would have written
    EXPECT_EQ(run("test -e /tmp/survivor && echo survived || echo gone").stdoutData, "gone\n");
}

TEST_F(BootedSandbox, OutputFloodIsCappedAndDoesNotWedgeTheChannel) {
    auto out = run("head -c 50000000 /dev/zero | tr '\\0' x; echo end >&2", "user", 300);
    EXPECT_EQ(out.result.exit_code, 0);
    EXPECT_TRUE(out.truncated);
    EXPECT_EQ(out.stdoutData.size(), 256u * 1024);
    EXPECT_EQ(out.stderrData, "end\n");
}

TEST_F(BootedSandbox, ConcurrentExecsShareOneChannel) {
    std::vector<std::future<ExecOutput>> futures;
    for (int i = 0; i < 20; ++i)
        futures.push_back(std::async(std::launch::async, [i] { return run("sleep 1; echo " + std::to_string(i)); }));
    for (int i = 0; i < 20; ++i) EXPECT_EQ(futures[i].get().stdoutData, std::to_string(i) + "\n");
}

TEST_F(BootedSandbox, AgentKilledMidExecIsRestartedAndTheSandboxStaysUsable) {
    auto victim = std::async(std::launch::async, [] {
        try {
            run("sleep 30");
            return std::string("finished");
        } catch (const Error& e) {
            return std::string(errorCodeName(e.code())) + ": " + e.what();
        }
    });
    std::this_thread::sleep_for(500ms);
    try {
        run("kill -9 $(pidof airlock-agent)", "root", 10);
    } catch (const Error&) {
        // This exec's own stream dies with the agent as well.
    }
    auto result = victim.get();
    EXPECT_EQ(result.rfind("agent_error", 0), 0u) << result;
    ASSERT_TRUE(test::waitFor(
        [] {
            try {
                return run("echo back").stdoutData == "back\n";
            } catch (const Error&) {
                return false;
            }
        },
        30s, 500ms));
}

TEST_F(BootedSandbox, DeleteStopsQemuAndRemovesEveryFile) {
    auto r = world->controller->create("t", CreateSandboxRequest{});
    std::string dir = world->controller->sandboxDir(r.id);
    EXPECT_EQ(test::countQemuProcesses(r.id), 1);
    EXPECT_TRUE(fs::exists(dir + "/console.log"));
    world->controller->destroy("t", r.id);
    EXPECT_TRUE(test::waitFor([&] { return test::countQemuProcesses(r.id) == 0; }, 10s));
    EXPECT_FALSE(fs::exists(dir));
    EXPECT_EQ(world->hypervisor->domainState(SandboxController::domainName(r.id)), DomainState::missing);
}

TEST_F(BootedSandbox, QemuRunsUnprivilegedWithSeccomp) {
    std::string dirNeedle = world->sandboxId;
    bool found = false;
    for (const auto& entry : fs::directory_iterator("/proc")) {
        std::string pid = entry.path().filename();
        if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream cmdline(entry.path() / "cmdline");
        std::string cmd((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
        if (cmd.find("qemu-system") == std::string::npos || cmd.find(dirNeedle) == std::string::npos) continue;
        found = true;
        EXPECT_NE(cmd.find(std::string("-sandbox\0on", 11)), std::string::npos) << "seccomp sandbox missing";
        std::ifstream status(entry.path() / "status");
        std::string line;
        while (std::getline(status, line))
            if (line.rfind("Uid:", 0) == 0) {
                EXPECT_EQ(line.find("\t0\t"), std::string::npos) << line;
            }
    }
    EXPECT_TRUE(found);
}

}  // namespace
}  // namespace airlock

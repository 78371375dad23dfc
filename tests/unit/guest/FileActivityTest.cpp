#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/FileActivity.hpp"
#include "support/TestEnv.hpp"

namespace airlock::guest {
namespace {
using nlohmann::json;
using namespace std::chrono_literals;

// Runs a shell command as another process (the agent's own accesses are not recorded).
void runShell(const std::string& dir, const std::string& command) {
    pid_t pid = ::fork();
    if (pid == 0) {
        if (::chdir(dir.c_str()) != 0) ::_exit(127);
        ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << command;
}

const json* pathIn(const json& summary, const std::string& path) {
    for (const auto& p : summary["paths"])
        if (p["path"] == path) return &p;
    return nullptr;
}

// Reads events until `ready` holds for the accumulated summary, or a deadline.
json collectUntil(FileActivity& activity, const std::function<bool(const json&)>& ready,
                  const FileActivity::TraceOf& traceOf) {
    json all = {{"paths", json::array()}};
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
        pollfd p{activity.fd(), POLLIN, 0};
        ::poll(&p, 1, 100);
        activity.onReadable(traceOf);
        json part = protocol::toJsonValue(activity.drain());  // as the host reads it
        for (auto& e : part["paths"]) all["paths"].push_back(e);
        all["mechanism"] = part["mechanism"];
        if (ready(all)) break;
    }
    return all;
}

class FileActivityTest : public ::testing::Test {
  protected:
    void SetUp() override {
        root = tmp.path() + "/ws";
        std::filesystem::create_directories(root + "/src");
        std::filesystem::create_directories(root + "/node_modules/left-pad");
        std::ofstream(root + "/src/input.txt") << "data\n";
        std::ofstream(outside) << "x\n";
    }
    test::TempDir tmp;
    std::string root;
    std::string outside = tmp.path() + "/outside.txt";
};

TEST_F(FileActivityTest, FanotifySeesReadsAndWritesOfOtherProcessesWithTheirCommand) {
    if (::geteuid() != 0) GTEST_SKIP() << "fanotify needs root (the guest agent is root)";
    FileActivity activity;
    ASSERT_EQ(activity.watch(root), "");
    ASSERT_TRUE(activity.watching());
    // The agent's own work (this process) is not recorded.
    std::ofstream(root + "/src/by-agent.txt") << "mine\n";
    runShell(root,
             "cat src/input.txt >/dev/null; echo hi > src/out.txt; echo x >> "
             "node_modules/left-pad/index.js; "
             "cat " +
                 outside + " >/dev/null");
    auto traceOf = [self = ::getpid()](pid_t pid) {
        return pid == self ? std::string("agent") : std::string("ex-test");
    };
    json all = collectUntil(
        activity,
        [](const json& s) { return pathIn(s, "src/out.txt") && pathIn(s, "src/input.txt"); },
        traceOf);
    EXPECT_EQ(all["mechanism"], "fanotify");
    const json* out = pathIn(all, "src/out.txt");
    ASSERT_NE(out, nullptr) << all.dump();
    EXPECT_GE((*out)["writes"].get<int>(), 1);
    EXPECT_GE((*out)["last_write_ms"].get<std::int64_t>(), (*out)["first_ms"].get<std::int64_t>());
    EXPECT_GT((*out)["first_ms"].get<std::int64_t>(), 1'700'000'000'000);
    EXPECT_EQ((*out)["execs"], json({"ex-test"}));
    const json* in = pathIn(all, "src/input.txt");
    ASSERT_NE(in, nullptr) << all.dump();
    EXPECT_GE((*in)["reads"].get<int>(), 1);
    EXPECT_EQ((*in)["writes"], 0);
    EXPECT_NE(pathIn(all, "node_modules/"), nullptr)
        << "bulk trees count as one path: " << all.dump();
    EXPECT_EQ(pathIn(all, "node_modules/left-pad/index.js"), nullptr);
    EXPECT_EQ(pathIn(all, "src/by-agent.txt"), nullptr)
        << "the agent's own writes are the host's to record";
    for (const auto& p : all["paths"])
        EXPECT_EQ(p["path"].get<std::string>().find("outside"), std::string::npos);
    // A drain empties the summary.
    EXPECT_TRUE(activity.drain().paths.empty());
}

// A filesystem mounted below the root (a sandbox's volume) is watched too.
TEST_F(FileActivityTest, FanotifySeesWritesOnAFilesystemMountedBelowTheRoot) {
    if (::geteuid() != 0) GTEST_SKIP() << "fanotify and mount need root (the guest agent is root)";
    std::filesystem::create_directories(root + "/vol");
    if (test::commandLine("mount -t tmpfs -o size=4m airlock-test " + root + "/vol && echo ok") != "ok")
        GTEST_SKIP() << "cannot mount a tmpfs here";
    struct Unmount {
        std::string dir;
        ~Unmount() { test::commandLine("umount " + dir); }
    } unmount{root + "/vol"};
    FileActivity activity;
    ASSERT_EQ(activity.watch(root), "");
    runShell(root, "echo cached > vol/dep.txt");
    auto traceOf = [](pid_t) { return std::string("ex-test"); };
    json all = collectUntil(activity, [](const json& s) { return pathIn(s, "vol/dep.txt"); }, traceOf);
    const json* dep = pathIn(all, "vol/dep.txt");
    ASSERT_NE(dep, nullptr) << all.dump();
    EXPECT_GE((*dep)["writes"].get<int>(), 1);
}

TEST_F(FileActivityTest, InotifyFallbackSeesWritesIncludingNewDirectories) {
    FileActivity activity;
    ASSERT_EQ(activity.watch(root, /*forceInotify=*/true), "");
    runShell(root, "cat src/input.txt >/dev/null; echo hi > src/out.txt");
    json all = collectUntil(activity,
                            [](const json& s) { return pathIn(s, "src/out.txt") != nullptr; }, {});
    EXPECT_EQ(all["mechanism"], "inotify");
    ASSERT_NE(pathIn(all, "src/out.txt"), nullptr) << all.dump();
    EXPECT_EQ(pathIn(all, "src/input.txt"), nullptr) << "inotify sees no reads";
    // A directory made after the watch started is watched too, and what was
    // written in it before its watch was added is not lost.
    runShell(root, "mkdir -p new/deeper && echo y > new/deeper/file.txt");
    all = collectUntil(
        activity, [](const json& s) { return pathIn(s, "new/deeper/file.txt") != nullptr; }, {});
    EXPECT_NE(pathIn(all, "new/deeper/file.txt"), nullptr) << all.dump();
}

TEST_F(FileActivityTest, RefusesWhatIsNotADirectory) {
    FileActivity activity;
    EXPECT_NE(activity.watch(root + "/missing"), "");
    EXPECT_NE(activity.watch(root + "/src/input.txt"), "");
    EXPECT_FALSE(activity.watching());
    EXPECT_EQ(protocol::toJsonValue(activity.drain()), json({{"watching", false}}));
}

}  // namespace
}  // namespace airlock::guest

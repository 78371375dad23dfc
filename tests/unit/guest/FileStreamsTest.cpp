// file_write as the agent runs it (in-process, on this host's files).
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "protocol/GuestCalls.hpp"
#include "protocol/GuestResults.hpp"
#include "protocol/Messages.hpp"
#include "support/InProcessAgent.hpp"
#include "support/TestEnv.hpp"

namespace airlock::test {
namespace {
namespace fs = std::filesystem;

// Writes `bytes` through file_write; the close's payload, or the reset's.
std::pair<bool, std::string> upload(AgentConnection& conn, const protocol::FileWriteRequest& r,
                                    const std::string& bytes) {
    auto deadline = AgentStream::Clock::now() + std::chrono::seconds(10);
    auto up = conn.open(r);
    try {
        up->write(0, bytes, deadline);
        up->closeWrite();
    } catch (const std::exception&) {
        // A refusal may come before the bytes go (a loaded host): the
        // write throws, and the reset is still the stream's answer below.
    }
    while (auto ev = up->next(deadline)) {
        if (ev->kind == AgentStream::Event::Kind::close) return {true, ev->payload};
        if (ev->kind == AgentStream::Event::Kind::reset) return {false, ev->payload};
    }
    return {false, "no answer"};
}

// envd's uploads (asRoot): written as root and given to the user, with the
// directories made for them, wherever they go; a plain upload is the
// user's own permissions.
TEST(FileWriteStream, AnEnvdUploadIsWrittenAsRootAndGivenToTheUser) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (the agent's identity in a guest)";
    passwd* nobody = ::getpwnam("nobody");
    ASSERT_NE(nobody, nullptr);
    InProcessAgent agent;
    auto conn = agent.connect();
    TempDir tmp;
    std::string locked = tmp.path() + "/root-only";
    fs::create_directories(locked);
    ::chmod(locked.c_str(), 0755);  // root's: nobody may not create in it
    std::string target = locked + "/made/for/it.txt";

    protocol::FileWriteRequest plain{target, std::nullopt, "nobody"};
    auto refused = upload(*conn, plain, "x");
    EXPECT_FALSE(refused.first);
    EXPECT_NE(refused.second.find("permission_denied"), std::string::npos) << refused.second;
    EXPECT_FALSE(fs::exists(locked + "/made"));

    auto envd = plain;
    envd.asRoot = true;
    auto written = upload(*conn, envd, "as envd writes");
    ASSERT_TRUE(written.first) << written.second;
    std::ifstream in(target);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, "as envd writes");
    for (const auto& p : {target, locked + "/made", locked + "/made/for"}) {
        struct stat st{};
        ASSERT_EQ(::stat(p.c_str(), &st), 0) << p;
        EXPECT_EQ(st.st_uid, nobody->pw_uid) << p << " is the user's";
    }
    struct stat parent{};
    ASSERT_EQ(::stat(locked.c_str(), &parent), 0);
    EXPECT_EQ(parent.st_uid, 0u) << "what was there keeps its owner";
}

// A listing is one frame: long names end it, truncated, before it would not
// fit (the guest once answered "internal" for a big directory).
TEST(FsOpStream, AListingTooBigForOneFrameIsTruncatedNotLost) {
    InProcessAgent agent;
    auto conn = agent.connect();
    TempDir tmp;
    for (int i = 0; i < 1000; ++i) {
        std::string name = std::to_string(1000 + i) + std::string(240, 'n');
        std::ofstream(tmp.path() + "/" + name) << "x";
    }
    protocol::FsRequest list{protocol::FsRequest::Action::list, tmp.path(), "", false, "root"};
    auto answer = conn->call(protocol::GuestRequest{list}, std::chrono::seconds(10));
    auto result = protocol::parseFsResult(list.action, answer);
    ASSERT_TRUE(result.entries);
    EXPECT_TRUE(result.truncated);
    EXPECT_GT(result.entries->size(), 100u);
    EXPECT_LT(result.entries->size(), 1000u);
    EXPECT_EQ(result.entries->front().name.substr(0, 4), "1000") << "sorted, from the first";
}

}  // namespace
}  // namespace airlock::test

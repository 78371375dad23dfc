#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "protocol/FileArchive.hpp"
#include "support/InProcessAgent.hpp"

namespace airlock::test {
namespace {
namespace fs = std::filesystem;
namespace archive = protocol::archive;

std::string file(const std::string& path, const std::string& bytes, std::uint32_t mode = 0644) {
    return protocol::archiveHeader(archive::kFile, path, mode, bytes.size()) + bytes;
}
std::string link(const std::string& path, const std::string& target) {
    return protocol::archiveHeader(archive::kSymlink, path, 0777, target.size()) + target;
}

std::string drain(const std::shared_ptr<AgentStream>& s, std::string* reset = nullptr) {
    std::string out;
    while (auto ev = s->next(AgentStream::Clock::now() + std::chrono::seconds(10))) {
        if (ev->kind == AgentStream::Event::Kind::data) out += ev->payload;
        if (ev->kind == AgentStream::Event::Kind::close) return out;
        if (ev->kind == AgentStream::Event::Kind::reset) {
            if (reset) *reset = ev->payload;
            return out;
        }
    }
    ADD_FAILURE() << "no close in time";
    return out;
}

class WorkspaceStreams : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("airlock-ws-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        outside_ = dir_.string() + "-outside";
        fs::remove_all(outside_);
        fs::create_directories(outside_);
        conn_ = agent_.connect();
    }
    void TearDown() override {
        fs::remove_all(dir_);
        fs::remove_all(outside_);
    }
    std::string unpack(const std::string& bytes) {
        auto s = conn_->open({{"op", "archive_unpack"}, {"path", dir_.string()}, {"user", "root"}});
        s->write(0, bytes, AgentStream::Clock::now() + std::chrono::seconds(10));
        s->closeWrite();
        std::string reset;
        drain(s, &reset);
        return reset;
    }
    InProcessAgent agent_;
    std::shared_ptr<AgentConnection> conn_;
    fs::path dir_;
    std::string outside_;
};

TEST_F(WorkspaceStreams, UnpackWritesFilesModesAndLinksAndRemoves) {
    std::string a = file("src/app.py", "print\n") + file("run.sh", "ls\n", 0755) +
                    link("src/link", "app.py") + file("stale/x", "x") +
                    protocol::archiveHeader(archive::kRemove, "stale", 0, 0);
    ASSERT_EQ(unpack(a), "");
    std::ifstream in(dir_ / "src/app.py");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(text, "print\n");
    EXPECT_EQ(fs::status(dir_ / "run.sh").permissions() & fs::perms::owner_exec,
              fs::perms::owner_exec);
    EXPECT_EQ(fs::read_symlink(dir_ / "src/link"), "app.py");
    EXPECT_FALSE(fs::exists(dir_ / "stale"));
}

TEST_F(WorkspaceStreams, ALinkInTheTreeNeverLeadsAWriteOutsideIt) {
    // A link to a directory outside, then a file "through" it: the link is
    // replaced by a real directory, the outside stays empty.
    std::string a = link("evil", outside_) + file("evil/planted", "pwn");
    EXPECT_EQ(unpack(a), "");
    EXPECT_TRUE(fs::is_empty(outside_));
    EXPECT_TRUE(fs::is_directory(fs::symlink_status(dir_ / "evil")));
    // A removal through a link is left alone.
    fs::create_directories(dir_);
    fs::create_symlink(outside_, dir_ / "away");
    std::ofstream(outside_ + "/keep") << "k";
    EXPECT_EQ(unpack(protocol::archiveHeader(archive::kRemove, "away/keep", 0, 0)), "");
    EXPECT_TRUE(fs::exists(outside_ + "/keep"));
}

TEST_F(WorkspaceStreams, ScanHashesWhatGitSeesAndSkipsWhatItIgnores) {
    std::string a = file(".gitignore", "node_modules/\n*.log\n") + file("hello.txt", "hello\n") +
                    file("debug.log", "x") + file("node_modules/big/blob", "x") +
                    file(".git/config", "x") + file("vendor/lib/helper.py", "x") +
                    link("l", "hello.txt");
    ASSERT_EQ(unpack(a), "");
    auto s = conn_->open({{"op", "workspace_scan"},
                          {"path", dir_.string()},
                          {"user", "root"},
                          {"skip", {"vendor/lib"}},
                          {"ignored", true}});
    std::string m = drain(s);
    auto has = [&](const std::string& rec) {
        return m.find(rec + std::string(1, '\0')) != std::string::npos;
    };
    EXPECT_TRUE(has("100644 ce013625030ba8dba906f756967f9e9ca394464a hello.txt")) << m;
    EXPECT_TRUE(has("I node_modules/"));
    EXPECT_TRUE(has("I debug.log"));
    EXPECT_TRUE(m.find("120000 ") != std::string::npos && has("hello.txt"));
    EXPECT_EQ(m.find(".git/config"), std::string::npos);
    EXPECT_EQ(m.find("helper.py"), std::string::npos);
    EXPECT_EQ(m.find("big/blob"), std::string::npos);
}

}  // namespace
}  // namespace airlock::test

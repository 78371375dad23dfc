#include <gtest/gtest.h>
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
using Kind = protocol::WatchRecord::Kind;

// A dir_watch stream read record by record, as the host reads it.
class Watch {
  public:
    Watch(AgentConnection& conn, const std::string& dir, bool recursive)
        : stream_(conn.open(protocol::DirWatchRequest{dir, recursive, false, "root"})) {}
    // Records until `done` holds for the last one (or the stream ends): false on timeout.
    bool until(const std::function<bool(const protocol::WatchRecord&)>& done) {
        auto deadline = AgentStream::Clock::now() + std::chrono::seconds(10);
        for (;;) {
            while (!lines_.empty()) {
                auto nl = lines_.find('\n');
                if (nl == std::string::npos) break;
                records.push_back(protocol::parseWatchRecord(lines_.substr(0, nl)));
                lines_.erase(0, nl + 1);
                if (done(records.back())) return true;
            }
            auto ev = stream_->next(deadline);
            if (!ev) return false;
            if (ev->kind == AgentStream::Event::Kind::data) lines_ += ev->payload;
            if (ev->kind == AgentStream::Event::Kind::reset) {
                reset = protocol::parseResetInfo(ev->payload);
                return false;
            }
            if (ev->kind == AgentStream::Event::Kind::close) return false;
        }
    }
    bool saw(Kind kind, const std::string& name) {
        for (const auto& r : records)
            if (r.kind == kind && r.name == name) return true;
        return until([&](const protocol::WatchRecord& r) { return r.kind == kind && r.name == name; });
    }
    std::vector<protocol::WatchRecord> records;
    std::optional<protocol::ResetInfo> reset;

  private:
    std::shared_ptr<AgentStream> stream_;
    std::string lines_;
};

class DirWatchStreamTest : public ::testing::Test {
  protected:
    DirWatchStreamTest() : conn_(agent_.connect()) {}
    InProcessAgent agent_;
    std::shared_ptr<AgentConnection> conn_;
    TempDir tmp_;
};

TEST_F(DirWatchStreamTest, ReportsChangesAndWhatNewDirectoriesHoldBelowIt) {
    std::string dir = tmp_.path();
    fs::create_directories(dir + "/old/inner");
    Watch w(*conn_, dir, true);
    ASSERT_TRUE(w.until([](const auto& r) { return r.kind == Kind::started; }));
    EXPECT_EQ(w.records.size(), 1u) << "what was there before is not reported";
    std::ofstream(dir + "/a.txt") << "hello";
    ASSERT_TRUE(w.saw(Kind::create, "a.txt"));
    ASSERT_TRUE(w.saw(Kind::write, "a.txt"));
    auto written = std::find_if(w.records.begin(), w.records.end(),
                                [](const auto& r) { return r.kind == Kind::write; });
    ASSERT_TRUE(written->entry);
    EXPECT_EQ(written->entry->type, protocol::FileEntry::Type::file);
    // A directory made (and filled) at once after the start: nothing in it is missed.
    fs::create_directories(dir + "/new/deep");
    std::ofstream(dir + "/new/deep/x.txt") << "x";
    EXPECT_TRUE(w.saw(Kind::create, "new"));
    EXPECT_TRUE(w.saw(Kind::create, "new/deep"));
    EXPECT_TRUE(w.saw(Kind::create, "new/deep/x.txt"));
    // Directories there at the start are watched too.
    std::ofstream(dir + "/old/inner/y") << "y";
    EXPECT_TRUE(w.saw(Kind::create, "old/inner/y"));
    fs::rename(dir + "/a.txt", dir + "/b.txt");
    EXPECT_TRUE(w.saw(Kind::rename, "a.txt"));
    EXPECT_TRUE(w.saw(Kind::create, "b.txt"));
    ::chmod((dir + "/b.txt").c_str(), 0600);
    EXPECT_TRUE(w.saw(Kind::chmod, "b.txt"));
    fs::remove(dir + "/b.txt");
    EXPECT_TRUE(w.saw(Kind::remove, "b.txt"));
    // A directory moved within the tree is watched under its new name.
    fs::rename(dir + "/new", dir + "/moved");
    std::ofstream(dir + "/moved/deep/z") << "z";
    EXPECT_TRUE(w.saw(Kind::create, "moved/deep/z"));
    // The watched directory going ends the watch.
    fs::remove_all(dir);
    EXPECT_FALSE(w.until([](const auto&) { return false; }));
    ASSERT_TRUE(w.reset);
    EXPECT_EQ(w.reset->code, "not_found");
}

// The files API writes beside its target and renames: the watcher sees what
// envd's in-place write shows.
TEST_F(DirWatchStreamTest, AnUploadIsACreateAndAWriteOfItsTarget) {
    std::string dir = tmp_.path();
    Watch w(*conn_, dir, false);
    ASSERT_TRUE(w.until([](const auto& r) { return r.kind == Kind::started; }));
    auto up = conn_->open(protocol::FileWriteRequest{dir + "/up.txt", std::nullopt, "root"});
    up->write(0, "uploaded", AgentStream::Clock::now() + std::chrono::seconds(10));
    up->closeWrite();
    while (auto ev = up->next(AgentStream::Clock::now() + std::chrono::seconds(10)))
        if (ev->kind != AgentStream::Event::Kind::data) break;
    EXPECT_TRUE(w.saw(Kind::create, "up.txt"));
    EXPECT_TRUE(w.saw(Kind::write, "up.txt"));
    std::ofstream(dir + "/after") << "a";
    ASSERT_TRUE(w.saw(Kind::create, "after"));
    for (const auto& r : w.records)
        EXPECT_EQ(r.name.find(".airlock-upload-"), std::string::npos) << r.name;
}

// A directory moved out of the tree takes its watches with it: what happens
// in it afterwards is not reported under its old name; moved back in, it is
// watched again under the name it has.
TEST_F(DirWatchStreamTest, ADirectoryMovedOutIsNoLongerWatched) {
    std::string dir = tmp_.path() + "/tree", away = tmp_.path() + "/away";
    fs::create_directories(dir + "/sub/inner");
    fs::create_directories(away);
    Watch w(*conn_, dir, true);
    ASSERT_TRUE(w.until([](const auto& r) { return r.kind == Kind::started; }));
    fs::rename(dir + "/sub", away + "/sub");
    ASSERT_TRUE(w.saw(Kind::rename, "sub"));
    std::ofstream(away + "/sub/inner/late.txt") << "outside";
    std::ofstream(dir + "/marker.txt") << "inside";
    ASSERT_TRUE(w.saw(Kind::create, "marker.txt"));
    for (const auto& r : w.records)
        EXPECT_EQ(r.name.find("late.txt"), std::string::npos) << r.name << " is outside the tree";
    fs::rename(away + "/sub", dir + "/back");
    ASSERT_TRUE(w.saw(Kind::create, "back"));
    std::ofstream(dir + "/back/inner/again.txt") << "in again";
    EXPECT_TRUE(w.saw(Kind::create, "back/inner/again.txt"));
    EXPECT_FALSE(w.reset) << w.reset->message;
}

TEST_F(DirWatchStreamTest, ANonRecursiveWatchSeesItsOwnEntriesOnly) {
    std::string dir = tmp_.path();
    fs::create_directories(dir + "/sub");
    Watch w(*conn_, dir, false);
    ASSERT_TRUE(w.until([](const auto& r) { return r.kind == Kind::started; }));
    std::ofstream(dir + "/sub/hidden") << "h";
    std::ofstream(dir + "/top") << "t";
    ASSERT_TRUE(w.saw(Kind::create, "top"));
    for (const auto& r : w.records) EXPECT_NE(r.name, "sub/hidden");
}

TEST_F(DirWatchStreamTest, RefusesWhatIsNotADirectory) {
    std::ofstream(tmp_.path() + "/file") << "f";
    for (auto [path, code] : std::vector<std::pair<std::string, std::string>>{
             {tmp_.path() + "/missing", "not_found"},
             {tmp_.path() + "/file", "bad_request"},
             {"relative/path", "bad_request"}}) {
        Watch w(*conn_, path, true);
        EXPECT_FALSE(w.until([](const auto&) { return true; })) << path;
        ASSERT_TRUE(w.reset) << path;
        EXPECT_EQ(w.reset->code, code) << path;
    }
}

}  // namespace
}  // namespace airlock::test

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "controller/GuestFiles.hpp"
#include "support/FakeSandboxAccess.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

namespace fs = std::filesystem;
using Action = protocol::FsRequest::Action;

class GuestFilesTest : public ::testing::Test {
  protected:
    test::TempDir dir;
    test::FakeSandboxAccess access;
    GuestFiles files{access};
    const std::string& id() { return access.sandbox.id; }

    protocol::FsRequest request(Action action, const std::string& path,
                                const std::string& to = "") {
        protocol::FsRequest r;
        r.action = action;
        r.path = path;
        r.to = to;
        r.user = "root";  // the in-process agent runs on the host
        return r;
    }
};

TEST_F(GuestFilesTest, AChangeOutsideTheWriteScopeNeverReachesTheGuestAndIsNotAudited) {
    access.writeScope = dir.path() + "/scope/";
    fs::create_directories(dir.path() + "/scope");
    EXPECT_EQ(test::codeOf(
                  [&] { files.fileOp("t1", id(), request(Action::mkdir, dir.path() + "/out")); }),
              ErrorCode::forbidden);
    EXPECT_FALSE(fs::exists(dir.path() + "/out"));
    // A move is checked at both ends.
    std::ofstream(dir.path() + "/scope/a") << "a";
    EXPECT_EQ(test::codeOf([&] {
                  files.fileOp("t1", id(),
                               request(Action::move, dir.path() + "/scope/a", dir.path() + "/b"));
              }),
              ErrorCode::forbidden);
    EXPECT_TRUE(fs::exists(dir.path() + "/scope/a"));
    EXPECT_TRUE(access.records().empty());

    auto made = files.fileOp("t1", id(), request(Action::mkdir, dir.path() + "/scope/new"));
    EXPECT_TRUE(fs::is_directory(dir.path() + "/scope/new"));
    ASSERT_TRUE(made.entry);
    EXPECT_EQ(made.entry->path, dir.path() + "/scope/new");
    EXPECT_EQ(made.entry->type, protocol::FileEntry::Type::directory);
    auto audited = access.recordsOf("file.mkdir");
    ASSERT_EQ(audited.size(), 1u);
    EXPECT_EQ(audited[0].data["path"], dir.path() + "/scope/new");
    EXPECT_EQ(audited[0].tenant, "t1");
}

TEST_F(GuestFilesTest, AReadIsNotAudited) {
    auto stat = files.fileOp("t1", id(), request(Action::stat, dir.path()));
    ASSERT_TRUE(stat.entry);
    EXPECT_EQ(stat.entry->type, protocol::FileEntry::Type::directory);
    EXPECT_TRUE(access.records().empty());
}

TEST_F(GuestFilesTest, ARelativeOrNulPathIsRefusedBeforeTheGuestIsAsked) {
    EXPECT_EQ(test::codeOf([&] { files.fileOp("t1", id(), request(Action::stat, "etc/passwd")); }),
              ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] {
                  files.fileOp("t1", id(), request(Action::stat, std::string("/etc\0x", 6)));
              }),
              ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { files.openDownload("t1", id(), "", nullptr); }),
              ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { files.openUpload("t1", id(), "x", std::nullopt); }),
              ErrorCode::bad_request);
}

TEST_F(GuestFilesTest, OnlyItsTenantReachesARunningSandbox) {
    EXPECT_EQ(test::codeOf([&] { files.fileOp("t2", id(), request(Action::stat, "/")); }),
              ErrorCode::not_found);
    EXPECT_EQ(test::codeOf([&] { files.openDownload("t2", id(), "/etc/hostname", nullptr); }),
              ErrorCode::not_found);
    access.sandbox.state = SandboxState::paused;
    EXPECT_EQ(test::codeOf([&] { files.fileOp("t1", id(), request(Action::stat, "/")); }),
              ErrorCode::conflict);
    EXPECT_EQ(test::codeOf([&] { files.openUpload("t1", id(), "/tmp/x", std::nullopt); }),
              ErrorCode::conflict);
}

TEST_F(GuestFilesTest, AnUploadIsRefusedOnAFullDiskAndOutsideTheScope) {
    access.diskFull = true;
    EXPECT_EQ(test::codeOf([&] { files.openUpload("t1", id(), dir.path() + "/f", std::nullopt); }),
              ErrorCode::insufficient_storage);
    access.diskFull = false;
    access.writeScope = dir.path() + "/scope/";
    EXPECT_EQ(test::codeOf([&] { files.openUpload("t1", id(), dir.path() + "/f", std::nullopt); }),
              ErrorCode::forbidden);
}

TEST_F(GuestFilesTest, AListingTheGuestWroteIsMasked) {
    access.secrets = {"s3cr3t-Value-4421"};
    std::ofstream(dir.path() + "/s3cr3t-Value-4421.txt") << "x";
    auto listed =
        protocol::toJsonValue(files.fileOp("t1", id(), request(Action::list, dir.path()))).dump();
    EXPECT_EQ(listed.find("s3cr3t-Value-4421"), std::string::npos) << listed;
    EXPECT_NE(listed.find("***.txt"), std::string::npos) << listed;
}

TEST_F(GuestFilesTest, AFileWriteIsAuditedWithThePathItWasAskedFor) {
    files.recordFileWrite("t1", id(), "/w/../w/f", "/w/f", 3, "abc");
    auto audited = access.recordsOf("file.written");
    ASSERT_EQ(audited.size(), 1u);
    EXPECT_EQ(audited[0].data["path"], "/w/f");
    EXPECT_EQ(audited[0].data["requested_path"], "/w/../w/f");
    EXPECT_EQ(audited[0].data["size"], 3);
}

TEST_F(GuestFilesTest, AWatchTheGuestRefusesIsAuditedAndNotFatal) {
    EXPECT_FALSE(files.watchFiles("t1", id(), "relative/dir"));
    ASSERT_EQ(access.recordsOf("file.watch_failed").size(), 1u);
    EXPECT_TRUE(files.watchFiles("t1", id(), dir.path()));
    auto started = access.recordsOf("file.watch_started");
    ASSERT_EQ(started.size(), 1u);
    std::string mechanism = started[0].data.value("mechanism", "");
    EXPECT_TRUE(mechanism == "fanotify" || mechanism == "inotify") << mechanism;
}

TEST_F(GuestFilesTest, ActivityIsDrainedIntoTheAuditOnlyWhileTheSandboxRuns) {
    ASSERT_TRUE(files.watchFiles("t1", id(), dir.path()));
    // Written by another process: the agent leaves its own process's events out.
    ASSERT_EQ(std::system(("echo x > '" + dir.path() + "/written'").c_str()), 0);
    auto before = access.records().size();
    access.sandbox.state = SandboxState::paused;
    files.drainFileActivity(access.sandbox);
    EXPECT_EQ(access.records().size(), before) << "a paused sandbox was drained";
    access.sandbox.state = SandboxState::running;
    EXPECT_TRUE(test::waitFor(
        [&] {
            files.drainFileActivity(access.sandbox);
            for (const auto& r : access.recordsOf("file.activity"))
                if (r.data.dump().find("\"written\"") != std::string::npos) return true;
            return false;
        },
        std::chrono::seconds(10)))
        << "the write was not drained once the sandbox ran";
}

}  // namespace
}  // namespace airlock

// Root working inside a directory a hostile QEMU can write: planted symlinks
// and swapped names never redirect a read, link, chmod or remove.
#include "core/SafeFs.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "controller/DiskLayers.hpp"
#include "core/Error.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

class SafeFsTest : public ::testing::Test {
protected:
    void SetUp() override {
        host = dir.path() + "/host-secret";
        std::ofstream(host) << "host file, not the sandbox's";
        ::chmod(host.c_str(), 0600);
        sandbox = dir.path() + "/sandbox";
        fs::create_directories(sandbox);
    }
    test::TempDir dir;
    std::string host, sandbox;
};

TEST_F(SafeFsTest, APlantedSymlinkIsNeverReadThrough) {
    fs::create_symlink(host, sandbox + "/console.log");
    EXPECT_EQ(safefs::readTail(sandbox, "console.log", 2000), "");
    std::ofstream(sandbox + "/real.log") << "0123456789";
    EXPECT_EQ(safefs::readTail(sandbox, "real.log", 4), "6789");
    EXPECT_THROW(safefs::digest(sandbox + "/console.log"), Error);
}

TEST_F(SafeFsTest, RemovingATreeNeverFollowsItsLinks) {
    std::string outside = dir.path() + "/outside";
    fs::create_directories(outside + "/keep");
    std::ofstream(outside + "/keep/file") << "keep";
    fs::create_directories(sandbox + "/a/b");
    std::ofstream(sandbox + "/a/b/f") << "x";
    fs::create_directory_symlink(outside, sandbox + "/a/link-to-dir");
    fs::create_symlink(host, sandbox + "/a/link-to-file");
    safefs::removeTree(sandbox);
    EXPECT_FALSE(fs::exists(fs::symlink_status(sandbox)));
    EXPECT_EQ(slurp(outside + "/keep/file"), "keep");
    EXPECT_EQ(slurp(host), "host file, not the sandbox's");
    EXPECT_NO_THROW(safefs::removeTree(sandbox)) << "a missing tree is fine";
    // A tree whose root is itself a symlink: only the link goes.
    fs::create_directory_symlink(outside, dir.path() + "/root-link");
    safefs::removeTree(dir.path() + "/root-link");
    EXPECT_TRUE(fs::exists(outside + "/keep/file"));
}

TEST_F(SafeFsTest, ADeepTreeIsRemovedWithBoundedDescriptors) {
    // Deeper than any path may be long: built by fd, as a hostile QEMU could.
    UniqueFd cur(::open(sandbox.c_str(), O_RDONLY | O_DIRECTORY));
    for (int i = 0; i < 600; ++i) {
        ASSERT_EQ(::mkdirat(cur.get(), "dddddddddddddddd", 0700), 0);
        if (i % 50 == 0) {
            int f = ::openat(cur.get(), "file", O_WRONLY | O_CREAT, 0600);
            ::close(f);
        }
        cur.reset(::openat(cur.get(), "dddddddddddddddd", O_RDONLY | O_DIRECTORY));
        ASSERT_TRUE(cur.valid());
    }
    cur.reset();
    auto fds = [] { return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator{}); };
    auto before = fds();
    safefs::removeTree(sandbox);
    EXPECT_FALSE(fs::exists(sandbox));
    EXPECT_EQ(fds(), before);
}

TEST_F(SafeFsTest, AHardLinkedNameIsNeverReadOrLinked) {
    std::string other = sandbox + "/console.log";
    ASSERT_EQ(::link(host.c_str(), other.c_str()), 0);  // root may; QEMU could with protected_hardlinks off
    EXPECT_EQ(safefs::readTail(sandbox, "console.log", 2000), "");
    std::string snapshot = dir.path() + "/snapshot";
    fs::create_directories(snapshot);
    EXPECT_THROW(safefs::linkFile(sandbox, "console.log", snapshot, "disk.qcow2"), Error);
}

TEST_F(SafeFsTest, LinkingRefusesASymlinkAndLinksTheFileItChecked) {
    std::string snapshot = dir.path() + "/snapshot";
    fs::create_directories(snapshot);
    fs::create_symlink(host, sandbox + "/disk-0.qcow2");
    EXPECT_THROW(safefs::linkFile(sandbox, "disk-0.qcow2", snapshot, "disk.qcow2"), Error);
    EXPECT_FALSE(fs::exists(fs::symlink_status(snapshot + "/disk.qcow2")));
    fs::remove(sandbox + "/disk-0.qcow2");
    std::ofstream(sandbox + "/disk-0.qcow2") << "overlay";
    auto fd = safefs::linkFile(sandbox, "disk-0.qcow2", snapshot, "disk.qcow2");
    ::fchmod(fd.get(), 0444);
    struct stat a {}, b {};
    ::stat((sandbox + "/disk-0.qcow2").c_str(), &a);
    ::stat((snapshot + "/disk.qcow2").c_str(), &b);
    EXPECT_EQ(a.st_ino, b.st_ino);
    EXPECT_EQ(b.st_mode & 0777, 0444u);
    struct stat h {};
    ::stat(host.c_str(), &h);
    EXPECT_EQ(h.st_mode & 0777, 0600u) << "the host file's mode was touched";
}

TEST_F(SafeFsTest, AnOverlayReplacesAPlantedNameAndNeverWritesThroughIt) {
    std::string staging = dir.path() + "/staging";
    fs::create_directories(staging);
    std::string base = dir.path() + "/base.qcow2";
    ASSERT_EQ(std::system(("qemu-img create -q -f qcow2 " + base + " 16M").c_str()), 0);
    fs::create_symlink(host, sandbox + "/disk-0.qcow2");
    createOverlay(staging, sandbox, "disk-0.qcow2", base, 16 << 20, std::nullopt);
    EXPECT_EQ(slurp(host), "host file, not the sandbox's");
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(sandbox + "/disk-0.qcow2")));
    EXPECT_EQ(fs::status(sandbox + "/disk-0.qcow2").permissions() & fs::perms::all, fs::perms(0600));
    EXPECT_TRUE(fs::is_empty(staging)) << "the staged file moved, nothing left behind";
}

TEST_F(SafeFsTest, IdentityChangesWithEveryWrite) {
    std::string f = dir.path() + "/f";
    std::ofstream(f) << "one";
    auto first = safefs::identity(f);
    EXPECT_EQ(safefs::identity(f), first);
    { std::ofstream(f, std::ios::app) << "x"; }
    EXPECT_NE(safefs::identity(f), first);
    EXPECT_EQ(safefs::digest(f).size, 4u);
}

}  // namespace
}  // namespace airlock

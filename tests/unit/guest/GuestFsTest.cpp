#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <limits>

#include "agent/GuestFs.hpp"
#include "agent/ProcessTable.hpp"
#include "agent/Spawn.hpp"
#include "support/TestEnv.hpp"

namespace airlock::guest {
namespace {

TEST(GuestPaths, ErrnoCodesMapToHttpFamilies) {
    EXPECT_EQ(errnoCode(ENOENT), "not_found");
    EXPECT_EQ(errnoCode(EISDIR), "conflict");
    EXPECT_EQ(errnoCode(ENOTEMPTY), "conflict");
    EXPECT_EQ(errnoCode(EACCES), "permission_denied");
    EXPECT_EQ(errnoCode(EIO), "io_error");
}

// What statEntry sends is what the host reads, whatever a file's date (a
// year outside 0..9999 shows the nearest end, not a failed listing).
TEST(GuestEntries, EveryEntryReadsBackOnTheHostWhateverItsDate) {
    EXPECT_EQ(utcTime(1700000000), "2023-11-14T22:13:20Z");
    EXPECT_EQ(utcTime(0), "1970-01-01T00:00:00Z");
    EXPECT_EQ(utcTime(-50000000000LL), "0385-07-25T07:06:40Z");
    EXPECT_EQ(utcTime(253402300800LL), "9999-12-31T23:59:59Z");  // year 10000
    EXPECT_EQ(utcTime(-62198755200LL), "0000-01-01T00:00:00Z");  // year -1
    EXPECT_EQ(utcTime(std::numeric_limits<std::time_t>::max()), "9999-12-31T23:59:59Z");
    EXPECT_EQ(utcTime(std::numeric_limits<std::time_t>::min()), "0000-01-01T00:00:00Z");

    test::TempDir dir;
    std::string file = dir.path() + "/dated";
    std::ofstream(file) << "abc";
    int err = -1;
    auto entry = statEntry(file, nameOf(file), err);
    ASSERT_EQ(err, 0);
    auto back =
        protocol::parseFileEntry(nlohmann::json::parse(protocol::toJsonValue(entry).dump()));
    EXPECT_EQ(back.size, 3u);
    EXPECT_EQ(back.name, "dated");
    auto root = statEntry("/", nameOf("/"), err);
    EXPECT_EQ(root.name, "/");
    EXPECT_NO_THROW(
        protocol::parseFileEntry(nlohmann::json::parse(protocol::toJsonValue(root).dump())))
        << "the root is a path like any other (mkdir / answers it)";
}

// A symlink is itself (its own size) with its target resolved through every
// link on the way; one that leads nowhere has no target.
TEST(GuestEntries, ASymlinkCarriesItsResolvedTargetAndTheTargetsTypeAndMode) {
    test::TempDir dir;
    std::string real = dir.path() + "/real";
    std::ofstream(real) << "content";
    ::chmod(real.c_str(), 0640);
    ASSERT_EQ(::symlink("real", (dir.path() + "/hop").c_str()), 0);
    ASSERT_EQ(::symlink((dir.path() + "/hop").c_str(), (dir.path() + "/link").c_str()), 0);
    ASSERT_EQ(::symlink(".", (dir.path() + "/here").c_str()), 0);
    ASSERT_EQ(::symlink("nowhere", (dir.path() + "/broken").c_str()), 0);
    ASSERT_EQ(::symlink("loop", (dir.path() + "/loop").c_str()), 0);
    int err = -1;
    auto link = statEntry(dir.path() + "/link", "link", err);
    ASSERT_EQ(err, 0);
    EXPECT_EQ(link.type, protocol::FileEntry::Type::symlink);
    EXPECT_EQ(link.size, (dir.path() + "/hop").size()) << "the link's own size";
    char resolvedDir[PATH_MAX];
    ASSERT_TRUE(::realpath(dir.path().c_str(), resolvedDir));
    EXPECT_EQ(link.target, std::string(resolvedDir) + "/real");
    EXPECT_EQ(link.targetType, protocol::FileEntry::Type::file);
    EXPECT_EQ(link.targetMode, "0640");
    auto back = protocol::parseFileEntry(nlohmann::json::parse(protocol::toJsonValue(link).dump()));
    EXPECT_EQ(back.target, link.target);
    EXPECT_EQ(back.targetMode, "0640");
    auto here = statEntry(dir.path() + "/here", "here", err);
    EXPECT_EQ(here.targetType, protocol::FileEntry::Type::directory);
    for (const char* nowhere : {"broken", "loop"}) {
        auto e = statEntry(dir.path() + "/" + nowhere, nowhere, err);
        ASSERT_EQ(err, 0) << nowhere;
        EXPECT_EQ(e.type, protocol::FileEntry::Type::symlink);
        EXPECT_FALSE(e.target) << nowhere;
        EXPECT_NO_THROW(
            protocol::parseFileEntry(nlohmann::json::parse(protocol::toJsonValue(e).dump())));
    }
}

TEST(OutputRing, KeepsTheLastBytesWithAbsoluteOffsets) {
    OutputRing ring(10);
    ring.append("hello");
    EXPECT_EQ(ring.read(0, 100), "hello");
    ring.append("world12345");
    EXPECT_EQ(ring.begin(), 5u);
    EXPECT_EQ(ring.end(), 15u);
    EXPECT_EQ(ring.read(0, 100), "world12345") << "reads before begin() start at begin()";
    EXPECT_EQ(ring.read(12, 2), "34");
    ring.append(std::string(25, 'z'));
    EXPECT_EQ(ring.read(0, 100), std::string(10, 'z'));
    EXPECT_EQ(ring.end(), 40u);
}

TEST(Signals, NamesAndNumbers) {
    EXPECT_EQ(signalFromName("TERM"), SIGTERM);
    EXPECT_EQ(signalFromName("SIGKILL"), SIGKILL);
    EXPECT_EQ(signalFromName("9"), 9);
    EXPECT_EQ(signalFromName("BOGUS"), 0);
    EXPECT_EQ(signalFromName("999"), 0);
}

}  // namespace
}  // namespace airlock::guest

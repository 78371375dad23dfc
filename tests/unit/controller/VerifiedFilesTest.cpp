#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "controller/VerifiedFiles.hpp"
#include "support/TestEnv.hpp"

namespace airlock {

TEST(VerifiedFiles, AFileIsTrustedOnlyAsItWasWhenVerified) {
    test::TempDir dir;
    std::string path = dir.path() + "/snap-1/memory.state";
    std::filesystem::create_directories(dir.path() + "/snap-1");
    std::ofstream(path) << "state";
    VerifiedFiles verified;
    auto before = safefs::identity(path);
    EXPECT_FALSE(verified.unchangedSinceVerified(path, before));
    verified.remember(path, before);
    EXPECT_TRUE(verified.unchangedSinceVerified(path, safefs::identity(path)));
    std::ofstream(path, std::ios::app) << "tampered";
    EXPECT_FALSE(verified.unchangedSinceVerified(path, safefs::identity(path)));
}

TEST(VerifiedFiles, ADiscardedSnapshotsFilesAreForgotten) {
    VerifiedFiles verified;
    safefs::FileIdentity id{1, 2, 3, 4, 5};
    verified.remember("/d/snapshots/snap-1/memory.state", id);
    verified.remember("/d/snapshots/snap-1/layer.qcow2", id);
    verified.remember("/d/snapshots/snap-10/layer.qcow2", id);
    verified.forgetUnder("/d/snapshots/snap-1");
    EXPECT_EQ(verified.size(), 1u);
    EXPECT_TRUE(verified.unchangedSinceVerified("/d/snapshots/snap-10/layer.qcow2", id))
        << "a sibling sharing the name's prefix was forgotten";
}

}  // namespace airlock

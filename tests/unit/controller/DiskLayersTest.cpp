// What a host accepts as a moved sandbox's disk: a plain qcow2 v3 within its
// size, never one whose header names another file for qemu-img and libvirt
// to open as root.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "controller/DiskLayers.hpp"
#include "core/Error.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

bool qemuImg(const std::string& args) {
    return std::system(("qemu-img " + args + " >/dev/null 2>&1").c_str()) == 0;
}

TEST(DiskLayers, AMovedDiskMustBeAPlainQcow2WithinItsSize) {
    if (!qemuImg("--version")) GTEST_SKIP() << "qemu-img is not installed";
    test::TempDir dir;
    const std::string plain = dir.path() + "/plain.qcow2";
    ASSERT_TRUE(qemuImg("create -f qcow2 " + plain + " 1G"));
    EXPECT_NO_THROW(requirePlainQcow2(plain, 1ull << 30));
    EXPECT_THROW(requirePlainQcow2(plain, 512ull << 20), Error) << "larger than the sandbox's disk";

    // An external data file: the header names a host file.
    const std::string victim = dir.path() + "/host-file";
    std::ofstream(victim) << "host data";
    const std::string external = dir.path() + "/external.qcow2";
    ASSERT_TRUE(qemuImg("create -f qcow2 -o data_file=" + victim + ",data_file_raw=on " +
                        external + " 1G"));
    try {
        requirePlainQcow2(external, 1ull << 30);
        ADD_FAILURE() << "an image with an external data file was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::bad_request);
    }

    const std::string v2 = dir.path() + "/v2.qcow2";
    ASSERT_TRUE(qemuImg("create -f qcow2 -o compat=0.10 " + v2 + " 1G"));
    EXPECT_THROW(requirePlainQcow2(v2, 1ull << 30), Error);
    const std::string raw = dir.path() + "/raw.img";
    ASSERT_TRUE(qemuImg("create -f raw " + raw + " 1M"));
    EXPECT_THROW(requirePlainQcow2(raw, 1ull << 30), Error);
    const std::string cut = dir.path() + "/cut.qcow2";
    std::ofstream(cut) << "QFI\xfb";
    EXPECT_THROW(requirePlainQcow2(cut, 1ull << 30), Error);
    EXPECT_THROW(requirePlainQcow2(dir.path() + "/missing", 1ull << 30), Error);
}

}  // namespace
}  // namespace airlock

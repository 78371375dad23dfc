// Volumes without a VM: made, listed, grown and removed with real ext4
// images; attachments read from sandbox records (one writer or many
// readers); the guest path rule; quotas.
#include "controller/SandboxVolumes.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "controller/TenantLimits.hpp"
#include "core/UniqueFd.hpp"
#include "store/Database.hpp"
#include "store/SnapshotStore.hpp"
#include "store/TenantStore.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
using test::codeOf;

class SandboxVolumesTest : public ::testing::Test {
  protected:
    SandboxVolumesTest()
        : db(dir.path() + "/state.db"),
          store(db),
          sandboxes(db),
          snapshots(db),
          tenantStore(db),
          limits(&tenantStore, rules, sandboxes, snapshots),
          uids(0, 0),
          volumes(dir.path(), store, sandboxes, limits, uids, 4, "nobody") {
        limits.setVolumeUsage([this](const std::string& t) { return volumes.usageOf(t); });
    }
    // A sandbox record that holds `mounts` (as a create writes it).
    void holder(const std::string& id, const std::vector<VolumeMount>& mounts,
                SandboxState state = SandboxState::running) {
        SandboxRecord r;
        r.id = id;
        r.tenant = "acme";
        r.state = state;
        r.volumesJson = volumeMountsJson(mounts);
        sandboxes.insert(r);
    }

    test::TempDir dir;
    Database db;
    VolumeStore store;
    SandboxStore sandboxes;
    SnapshotStore snapshots;
    TenantStore tenantStore;
    policy::PolicyRules rules;
    TenantLimits limits;
    UidPool uids;
    SandboxVolumes volumes;
};

TEST_F(SandboxVolumesTest, OneWriterOrManyReaders) {
    auto v = volumes.create("acme", "cache", 1, "ext4");
    EXPECT_EQ(v.record.sizeBytes, 1ull << 30);
    EXPECT_TRUE(v.attachments.empty());
    EXPECT_EQ(codeOf([&] { volumes.create("acme", "cache", 1, "ext4"); }), ErrorCode::conflict);
    EXPECT_EQ(codeOf([&] { volumes.create("acme", "Cache!", 1, "ext4"); }), ErrorCode::bad_request);
    EXPECT_EQ(codeOf([&] { volumes.create("acme", "x", 1, "xfs"); }), ErrorCode::bad_request);
    EXPECT_EQ(codeOf([&] { volumes.create("acme", "x", 5, "ext4"); }), ErrorCode::bad_request)
        << "past the server's largest volume";

    auto mounts = volumes.resolve("acme", {VolumeRequest{"cache", "/mnt/cache/", false}});
    ASSERT_EQ(mounts.size(), 1u);
    EXPECT_EQ(mounts[0].path, "/mnt/cache") << "normalized";
    holder("sbx-w", mounts);
    auto refused = [&](bool readOnly) {
        try {
            volumes.resolve("acme", {VolumeRequest{"cache", "/mnt/c", readOnly}});
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("allowed");
    };
    EXPECT_NE(refused(false).find("sbx-w"), std::string::npos) << "the 409 names the holder";
    EXPECT_NE(refused(true).find("sbx-w"), std::string::npos) << "no reader beside a writer";
    EXPECT_EQ(codeOf([&] { volumes.remove("acme", "cache"); }), ErrorCode::conflict);
    EXPECT_EQ(codeOf([&] { volumes.grow("acme", "cache", 2); }), ErrorCode::conflict);
    EXPECT_EQ(codeOf([&] { volumes.readPath("acme", "cache", "/", -1); }), ErrorCode::conflict);
    EXPECT_EQ(codeOf([&] { volumes.prepareUpload("acme", "cache"); }), ErrorCode::conflict)
        << "an upload is refused before its body";

    sandboxes.remove("sbx-w");
    holder("sbx-r1", volumes.resolve("acme", {VolumeRequest{"cache", "/data", true}}));
    holder("sbx-r2", volumes.resolve("acme", {VolumeRequest{"cache", "/data", true}}));
    EXPECT_EQ(volumes.get("acme", "cache").attachments.size(), 2u);
    EXPECT_NE(refused(false).find("read-only"), std::string::npos);
    EXPECT_EQ(volumes.readPath("acme", "cache", "/", -1).stat.type, "dir")
        << "readers only: readable";
    EXPECT_EQ(codeOf([&] { volumes.prepareUpload("acme", "cache"); }), ErrorCode::conflict);
    EXPECT_EQ(codeOf([&] { volumes.removeFile("acme", "cache", "/x"); }), ErrorCode::conflict)
        << "written only while detached";
    sandboxes.updateState("sbx-r1", SandboxState::stopped);
    sandboxes.updateState("sbx-r2", SandboxState::error);
    EXPECT_TRUE(volumes.get("acme", "cache").attachments.empty()) << "a VM gone holds nothing";

    EXPECT_EQ(codeOf([&] { volumes.grow("acme", "cache", 0); }), ErrorCode::bad_request);
    EXPECT_EQ(volumes.grow("acme", "cache", 2).record.sizeBytes, 2ull << 30);
    EXPECT_EQ(std::filesystem::file_size(volumes.imagePath(v.record.id)), 2ull << 30);
    volumes.remove("acme", "cache");
    EXPECT_FALSE(std::filesystem::exists(volumes.imagePath(v.record.id)));
    EXPECT_EQ(codeOf([&] { volumes.get("acme", "cache"); }), ErrorCode::not_found);
}

TEST_F(SandboxVolumesTest, FilesOfADetachedVolumeAndOtherTenants) {
    volumes.create("acme", "data", 1, "ext4");
    std::string staged = dir.path() + "/up.txt";
    std::ofstream(staged) << "hello";
    volumes.writeFile("acme", "data", "/a/b.txt", staged);
    EXPECT_EQ(volumes.prepareUpload("acme", "data"), 1ull << 30) << "a file may be as big as its volume";
    std::string out = dir.path() + "/out";
    {
        UniqueFd fd(::open(out.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
        auto file = volumes.readPath("acme", "data", "/a/b.txt", fd.get());
        EXPECT_EQ(file.stat.type, "file");
        EXPECT_EQ(file.stat.size, 5u);
    }
    std::ifstream in(out);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "hello") << "copied out whole";
    auto entries = volumes.readPath("acme", "data", "/a", -1).entries;
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].uid, SandboxVolumes::kGuestUid);
    EXPECT_EQ(codeOf([&] { volumes.get("other", "data"); }), ErrorCode::not_found);
    EXPECT_EQ(codeOf([&] { volumes.resolve("other", {VolumeRequest{"data", "/mnt/d", false}}); }),
              ErrorCode::not_found);
}

TEST_F(SandboxVolumesTest, GuestPathsAreAbsoluteAndNeverASystemDirectory) {
    EXPECT_EQ(SandboxVolumes::checkGuestPath("/mnt//cache/./x"), "/mnt/cache/x");
    EXPECT_EQ(SandboxVolumes::checkGuestPath("/home/user/work"), "/home/user/work");
    for (const char* bad : {"", "mnt/x", "/", "/etc", "/etc/x", "/usr/local/x", "/proc/1", "/mnt/../etc",
                            "/mnt/a b", "/mnt/'x", "/home", "/tmp", "/dev/shm/x", "/var/lib/apt"})
        EXPECT_EQ(codeOf([&] { SandboxVolumes::checkGuestPath(bad); }), ErrorCode::bad_request)
            << bad;
    volumes.create("acme", "one", 1, "ext4");
    volumes.create("acme", "two", 1, "ext4");
    EXPECT_EQ(codeOf([&] {
                  volumes.resolve("acme", {VolumeRequest{"one", "/mnt/a", false},
                                           VolumeRequest{"two", "/mnt/a/b", false}});
              }),
              ErrorCode::bad_request)
        << "overlapping paths";
    EXPECT_EQ(codeOf([&] {
                  volumes.resolve("acme", {VolumeRequest{"one", "/mnt/a", false},
                                           VolumeRequest{"one", "/mnt/b", true}});
              }),
              ErrorCode::bad_request)
        << "a volume named twice";
    auto script = SandboxVolumes::mountScript(
        volumes.resolve("acme", {VolumeRequest{"one", "/mnt/a", true}}));
    EXPECT_NE(script.find("ro,noload"), std::string::npos);
}

TEST_F(SandboxVolumesTest, QuotasCountVolumesAndTheirSize) {
    TenantRecord t;
    t.name = "acme";
    t.quota.volumes = 2;
    t.quota.volumeGib = 3;
    tenantStore.put(t);
    volumes.create("acme", "a", 2, "ext4");
    EXPECT_EQ(codeOf([&] { volumes.create("acme", "b", 2, "ext4"); }), ErrorCode::quota_exceeded)
        << "4 GiB > 3";
    volumes.create("acme", "b", 1, "ext4");
    EXPECT_EQ(codeOf([&] { volumes.create("acme", "c", 1, "ext4"); }), ErrorCode::quota_exceeded)
        << "a third volume";
    EXPECT_EQ(codeOf([&] { volumes.grow("acme", "b", 2); }), ErrorCode::quota_exceeded);
    EXPECT_EQ(limits.usageOf("acme").volumes, 2u);
    EXPECT_EQ(limits.usageOf("acme").volumeGib, 3u);
}

}  // namespace
}  // namespace airlock

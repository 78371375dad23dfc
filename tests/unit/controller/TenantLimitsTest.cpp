// A tenant's floors and quotas over real SQLite stores, without a VM.
#include <gtest/gtest.h>

#include "controller/DiskLayers.hpp"
#include "controller/TenantLimits.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "store/Database.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
using test::codeOf;

class TenantLimitsTest : public ::testing::Test {
  protected:
    TenantLimitsTest() {
        operatorRules.deny = {"shutdown*"};
        TenantRecord acme;
        acme.name = "acme";
        acme.deny = {"git push*"};
        acme.approve = {"curl *"};
        acme.networkAllow = {"*.internal.test"};
        acme.networkSet = true;
        acme.quota.sandboxes = 2;
        acme.quota.vcpus = 3;
        acme.quota.diskGib = 4;
        acme.quota.memoryMib = 600;
        acme.quota.snapshots = 1;
        acme.quota.concurrentExecs = 1;
        limits.put(acme);
    }
    SandboxRecord sandbox(SandboxState state, unsigned vcpus = 1, std::uint64_t diskGib = 0,
                          const std::string& tenant = "acme", unsigned memoryMib = 256) {
        SandboxRecord r;
        r.memoryMib = memoryMib;
        r.id = newId("sbx-");
        r.tenant = tenant;
        r.state = state;
        r.vcpus = vcpus;
        r.diskBytes = diskGib * kGiB;
        return r;
    }
    test::TempDir dir;
    Database db{dir.path() + "/state.db"};
    TenantStore tenants{db};
    SandboxStore sandboxes{db};
    SnapshotStore snapshots{db};
    policy::PolicyRules operatorRules;
    TenantLimits limits{&tenants, operatorRules, sandboxes, snapshots};
};

TEST_F(TenantLimitsTest, ASandboxsAllowRulesCannotOpenTheOperatorsOrItsTenantsFloor) {
    auto allow = [](std::vector<std::string> rules) {
        policy::PolicyRules r;
        r.allow = std::move(rules);
        return r;
    };
    EXPECT_NO_THROW(limits.requireWithinFloor("acme", allow({"ls *", "make test"}), {}));
    for (const char* opens : {"git *", "git push --force*", "curl *", "shutdown -h*", "*", " * "})
        EXPECT_EQ(codeOf([&] { limits.requireWithinFloor("acme", allow({opens}), {}); }),
                  ErrorCode::forbidden)
            << opens;
    // Another tenant has only the operator's floor; an internal one too.
    EXPECT_NO_THROW(limits.requireWithinFloor("beta", allow({"git *"}), {}));
    EXPECT_EQ(codeOf([&] { limits.requireWithinFloor("_warm", allow({"shutdown*"}), {}); }),
              ErrorCode::forbidden);
    EXPECT_FALSE(limits.bindingOf("_warm"));
    EXPECT_FALSE(limits.bindingOf(""));
    EXPECT_TRUE(limits.bindingOf("acme"));
}

TEST_F(TenantLimitsTest, ASandboxsNetworkStaysInsideItsTenants) {
    EXPECT_NO_THROW(limits.requireWithinFloor("acme", {}, {"api.internal.test"}));
    EXPECT_EQ(codeOf([&] { limits.requireWithinFloor("acme", {}, {"api.elsewhere.test"}); }),
              ErrorCode::forbidden);
    EXPECT_NO_THROW(limits.requireWithinFloor("beta", {}, {"api.elsewhere.test"}))
        << "a tenant that never set network rules bounds nothing";
}

TEST_F(TenantLimitsTest, QuotasCountWhatIsLiveAndNothingElse) {
    sandboxes.insert(sandbox(SandboxState::running, 2, 3));
    sandboxes.insert(sandbox(SandboxState::error, 8, 100));  // gone: counts nothing
    sandboxes.insert(sandbox(SandboxState::running, 8, 100, "beta"));
    auto u = limits.usageOf("acme");
    EXPECT_EQ(u.sandboxes, 1u);
    EXPECT_EQ(u.vcpus, 2u);
    EXPECT_EQ(u.diskGib, 3u);
    EXPECT_NO_THROW(limits.requireSandboxQuota(sandbox(SandboxState::creating, 1, 1)));
    // Which figure is exceeded: the one the message names.
    auto exceeded = [&](const SandboxRecord& r) -> std::string {
        try {
            limits.requireSandboxQuota(r);
        } catch (const Error& e) {
            if (e.code() == ErrorCode::quota_exceeded) return e.what();
        }
        return "";
    };
    auto names = [](const std::string& why, const char* figure) {
        return why.find(std::string("quota exceeded: ") + figure + " ") != std::string::npos;
    };
    EXPECT_TRUE(names(exceeded(sandbox(SandboxState::creating, 2)), "vcpus")) << "2 in use + 2 > 3";
    EXPECT_TRUE(names(exceeded(sandbox(SandboxState::creating, 1, 2)), "disk_gib")) << "3 + 2 > 4";
    EXPECT_TRUE(names(exceeded(sandbox(SandboxState::creating, 1, 0, "acme", 512)), "memory_mib"))
        << "256 + 512 > 600";
    // A paused sandbox of no vcpus and memory still counts as a sandbox.
    sandboxes.insert(sandbox(SandboxState::paused, 0, 0, "acme", 0));
    EXPECT_TRUE(names(exceeded(sandbox(SandboxState::creating)), "sandboxes"))
        << exceeded(sandbox(SandboxState::creating));
    EXPECT_NO_THROW(limits.requireSandboxQuota(sandbox(SandboxState::creating, 8, 100, "beta")));

    EXPECT_NO_THROW(limits.requireSnapshotQuota("acme"));
    SnapshotRecord s;
    s.id = newId("snap-");
    s.tenant = "acme";
    snapshots.insert(s);
    EXPECT_EQ(limits.usageOf("acme").snapshots, 1u);
    EXPECT_EQ(codeOf([&] { limits.requireSnapshotQuota("acme"); }), ErrorCode::quota_exceeded);
    snapshots.updateState(s.id, SnapshotState::deleted);
    EXPECT_NO_THROW(limits.requireSnapshotQuota("acme")) << "a deleted snapshot counts nothing";
}

TEST_F(TenantLimitsTest, ConcurrentExecsAreSlotsHeldUntilTheLastCopyGoes) {
    auto slot = limits.acquireExecSlot("acme");
    EXPECT_EQ(limits.usageOf("acme").concurrentExecs, 1u);
    EXPECT_EQ(codeOf([&] { limits.acquireExecSlot("acme"); }), ErrorCode::quota_exceeded);
    auto copy = slot;
    slot.reset();
    EXPECT_EQ(codeOf([&] { limits.acquireExecSlot("acme"); }), ErrorCode::quota_exceeded);
    copy.reset();
    EXPECT_EQ(limits.usageOf("acme").concurrentExecs, 0u);
    EXPECT_NO_THROW(limits.acquireExecSlot("acme"));
    auto a = limits.acquireExecSlot("beta"), b = limits.acquireExecSlot("beta");
    EXPECT_EQ(limits.usageOf("beta").concurrentExecs, 2u) << "beta has no limit";
}

TEST_F(TenantLimitsTest, PutChecksNetworkEntriesAndNeedsAStore) {
    TenantRecord bad;
    bad.name = "gamma";
    bad.networkAllow = {"not a host!"};
    bad.networkSet = true;
    EXPECT_EQ(codeOf([&] { limits.put(bad); }), ErrorCode::bad_request);
    EXPECT_FALSE(limits.find("gamma"));
    auto put = limits.put(TenantRecord{"gamma", {}, {}, {}, {}, {}, false, "", "", ""});
    EXPECT_FALSE(put.updatedAt.empty());
    EXPECT_EQ(limits.list().size(), 2u);
    TenantLimits none(nullptr, operatorRules, sandboxes, snapshots);
    EXPECT_EQ(codeOf([&] { none.put(bad); }), ErrorCode::internal);
    EXPECT_FALSE(none.find("acme"));
    EXPECT_TRUE(none.list().empty());
    EXPECT_NO_THROW(none.requireSandboxQuota(sandbox(SandboxState::creating, 64, 1000)));
}

}  // namespace
}  // namespace airlock

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "controller/SparePool.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
using namespace std::chrono_literals;

namespace {

// Spares are names; what is in use is set by the test.
class FakeVms : public SparePool::Vms {
  public:
    std::optional<std::string> boot(const std::string& shape) override {
        std::unique_lock lock(mutex);
        cv.wait(lock, [&] { return !holdBoots; });
        if (failBoots) throw std::runtime_error("libvirt said no");
        if (!used.shapes.count(shape)) return std::nullopt;
        ++boots;
        return "spare-" + std::to_string(boots);
    }
    void load(const std::string& spare, const std::string& snapshot) override {
        std::lock_guard lock(mutex);
        loads.push_back(spare + "<" + snapshot);
    }
    bool snapshotReady(const std::string& snapshot) override {
        std::lock_guard lock(mutex);
        return used.snapshots.count(snapshot) > 0;
    }
    void destroy(const std::string& spare) override {
        std::lock_guard lock(mutex);
        destroyed.push_back(spare);
    }
    InUse inUse() override {
        std::lock_guard lock(mutex);
        return used;
    }
    void release() {
        {
            std::lock_guard lock(mutex);
            holdBoots = false;
        }
        cv.notify_all();
    }
    std::size_t destroyedCount() {
        std::lock_guard lock(mutex);
        return destroyed.size();
    }

    std::mutex mutex;
    std::condition_variable cv;
    InUse used;
    bool holdBoots = false, failBoots = false;
    int boots = 0;
    std::vector<std::string> loads, destroyed;
};

}  // namespace

TEST(SparePool, AWantedSpareIsBootedOnceAndTakenByTheNextClone) {
    FakeVms vms;
    vms.used.shapes = {"minimal|1|256"};
    SparePool pool(vms, 1, 5s);
    pool.want("minimal|1|256");
    pool.want("minimal|1|256");  // one per shape: the second asks for nothing more
    ASSERT_TRUE(test::waitFor([&] { return pool.count() == 1 && pool.idle(); }, 5s, 5ms));
    auto taken = pool.take("minimal|1|256", "snap-1");
    ASSERT_TRUE(taken);
    EXPECT_EQ(taken->id, "spare-1");
    EXPECT_FALSE(taken->loaded);
    EXPECT_EQ(pool.count(), 0u);
    EXPECT_EQ(vms.boots, 1);
    // Nothing on its way: no spare, and no wait.
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(pool.take("minimal|1|256", "snap-1"));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
}

TEST(SparePool, ACloneTakesTheSpareLoadedWithItsSnapshotAndNeverAnotherSnapshots) {
    FakeVms vms;
    vms.used.shapes = {"s"};
    vms.used.snapshots = {"snap-1", "snap-2"};
    SparePool pool(vms, 1, 5s);
    pool.want("s", {}, "snap-1");
    ASSERT_TRUE(test::waitFor([&] { return pool.count() == 1 && pool.idle(); }, 5s, 5ms));
    EXPECT_FALSE(pool.take("s", "snap-2")) << "a spare holding snap-1 went to a clone of snap-2";
    auto taken = pool.take("s", "snap-1");
    ASSERT_TRUE(taken);
    EXPECT_TRUE(taken->loaded);
    ASSERT_EQ(vms.loads.size(), 1u);
    EXPECT_EQ(vms.loads[0], taken->id + "<snap-1");
}

TEST(SparePool, ACloneWaitsForTheSpareOnItsWay) {
    FakeVms vms;
    vms.used.shapes = {"s"};
    vms.used.snapshots = {"snap-1"};
    vms.holdBoots = true;
    SparePool pool(vms, 1, 10s);
    pool.want("s", {}, "snap-1");
    std::thread releaser([&] {
        std::this_thread::sleep_for(200ms);  // the boot takes a while
        vms.release();
    });
    auto taken = pool.take("s", "snap-1");
    releaser.join();
    ASSERT_TRUE(taken) << "the clone did not wait for the spare being loaded with its snapshot";
    EXPECT_TRUE(taken->loaded);
}

TEST(SparePool, TrimDropsSparesOfShapesAndSnapshotsNoLongerInUse) {
    FakeVms vms;
    vms.used.shapes = {"a", "b"};
    vms.used.snapshots = {"snap-a"};
    SparePool pool(vms, 1, 5s);
    pool.want("a", {}, "snap-a");
    pool.want("b");
    ASSERT_TRUE(test::waitFor([&] { return pool.count() == 2 && pool.idle(); }, 5s, 5ms));
    {
        std::lock_guard lock(vms.mutex);
        vms.used.shapes = {"a"};  // b's last sandbox went
        vms.used.snapshots = {};  // snap-a was deleted
    }
    pool.trim();
    EXPECT_EQ(vms.destroyedCount(), 2u);
    // Shape a is still in use: it gets a spare again, without the deleted state.
    ASSERT_TRUE(test::waitFor([&] { return pool.count() == 1 && pool.idle(); }, 5s, 5ms));
    auto taken = pool.take("a", "snap-x");
    ASSERT_TRUE(taken);
    EXPECT_FALSE(taken->loaded);
}

TEST(SparePool, TheLatestSnapshotTakesTheOldestLoadedSparesPlace) {
    FakeVms vms;
    vms.used.shapes = {"s"};
    vms.used.snapshots = {"snap-1", "snap-2"};
    SparePool pool(vms, 1, 5s);
    pool.want("s", {}, "snap-1");
    ASSERT_TRUE(test::waitFor([&] { return pool.count() == 1 && pool.idle(); }, 5s, 5ms));
    pool.want("s", {}, "snap-2");
    ASSERT_TRUE(test::waitFor([&] { return vms.destroyedCount() == 1 && pool.idle(); }, 5s, 5ms));
    EXPECT_EQ(pool.count(), 1u);
    EXPECT_FALSE(pool.take("s", "snap-1"));
    auto taken = pool.take("s", "snap-2");
    ASSERT_TRUE(taken);
    EXPECT_TRUE(taken->loaded);
}

TEST(SparePool, AFailedBootIsSurvivedAndStopDestroysEverySpare) {
    FakeVms vms;
    vms.used.shapes = {"a", "b"};
    vms.failBoots = true;
    SparePool pool(vms, 1, 5s);
    pool.want("a");
    ASSERT_TRUE(test::waitFor([&] { return pool.idle(); }, 5s, 5ms));
    EXPECT_EQ(pool.count(), 0u);
    {
        std::lock_guard lock(vms.mutex);
        vms.failBoots = false;
    }
    pool.want("a");
    pool.want("b");
    ASSERT_TRUE(test::waitFor([&] { return pool.count() == 2 && pool.idle(); }, 5s, 5ms));
    pool.stop();
    EXPECT_EQ(pool.count(), 0u);
    EXPECT_EQ(vms.destroyedCount(), 2u);
    pool.want("a");  // after stop: ignored
    EXPECT_TRUE(pool.idle());
}

TEST(SparePool, WithoutSparesNothingStartsAndNothingWaits) {
    FakeVms vms;
    vms.used.shapes = {"a"};
    SparePool pool(vms, 0, 5s);
    pool.want("a");
    EXPECT_TRUE(pool.idle());
    EXPECT_FALSE(pool.take("a", "snap-1"));
    EXPECT_EQ(vms.boots, 0);
}

}  // namespace airlock

// Real VMs through libvirt + QEMU: pause/resume, snapshots, clones (with spare
// VMs), the debian template's frozen disk layers, and a churn of 50
// create/delete cycles that must leave nothing behind. Layered fixtures as in
// Firecracker's tests: one booted sandbox and one snapshot of it for the whole
// suite; the clones are made from that snapshot.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "agentclient/AgentConnection.hpp"
#include "controller/SandboxController.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "hypervisor/AccelProbe.hpp"
#include "hypervisor/LibvirtHypervisor.hpp"
#include "store/Database.hpp"
#include "support/RealWorld.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

ControllerConfig lifecycleConfig() {
    ControllerConfig config;
    config.sparesPerShape = 1;
    config.defaultTimeoutS = 0;
    config.qemuUidBase = 300000;  // each QEMU its own uid, as in airlockd
    config.qemuUidCount = 64;
    return config;
}

struct World : test::RealWorld {
    World() : RealWorld(lifecycleConfig()) {}
    std::string sourceId;    // booted once
    std::string snapshotId;  // of sourceId, with a marker in memory
    std::string marker;
};

// The uid a domain's QEMU process runs as (from /proc), or -1.
long qemuUidOf(const std::string& sandboxId) {
    for (const auto& p : fs::directory_iterator("/proc")) {
        std::ifstream cmd(p.path() / "cmdline");
        std::string line((std::istreambuf_iterator<char>(cmd)), {});
        if (line.find("guest=airlock-" + sandboxId + ",") == std::string::npos) continue;
        std::ifstream status(p.path() / "status");
        std::string l;
        while (std::getline(status, l))
            if (l.rfind("Uid:", 0) == 0) return std::stol(l.substr(4));
    }
    return -1;
}

// What another sandbox's QEMU could do: open (or connect to) `path` as that uid.
bool reachableAs(unsigned uid, const std::string& path) {
    pid_t pid = ::fork();
    if (pid == 0) {
        if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 ||
            ::setresuid(uid, uid, uid) != 0)
            ::_exit(2);
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0) ::_exit(1);
        if (S_ISSOCK(st.st_mode)) {
            int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
            sockaddr_un a{};
            a.sun_family = AF_UNIX;
            std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
            ::_exit(::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ? 0 : 1);
        }
        ::_exit(::open(path.c_str(), O_RDONLY | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0)) >= 0 ? 0
                                                                                              : 1);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::size_t entries(const std::string& dir) {
    std::error_code ec;
    std::size_t n = 0;
    for (auto it = fs::directory_iterator(dir, ec); it != fs::directory_iterator(); ++it) ++n;
    return n;
}

class Lifecycle : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        ASSERT_TRUE(test::templatesBuilt()) << "run scripts/setup first: no minimal template";
        world = new World;
        world->sourceId = world->controller->create("t", CreateSandboxRequest{}).id;
        world->marker = run(world->sourceId,
                            "echo mem-$$-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \\n') "
                            "| tee /dev/shm/marker")
                            .stdoutData;
        ASSERT_FALSE(world->marker.empty());
        world->snapshotId = world->controller->snapshot("t", world->sourceId).id;
    }

    static void TearDownTestSuite() {
        if (!world) return;
        if (world->controller) {
            world->controller->shutdown();
            for (const auto& r : world->controller->list("t"))
                world->controller->destroy("t", r.id);
            for (const auto& s : world->controller->snapshots().list("t"))
                world->controller->deleteSnapshot("t", s.id);
        }
        delete world;
        world = nullptr;
    }

    static ExecOutput run(const std::string& id, const std::string& script,
                          const std::string& user = "user") {
        ExecOptions o;
        o.shell = script;
        o.user = user;
        o.timeoutS = 60;
        return world->controller->commands().exec("t", id, o);
    }

    static SandboxRecord clone() {
        CreateSandboxRequest r;
        r.snapshot = world->snapshotId;
        return world->controller->create("t", r);
    }

    static World* world;
};
World* Lifecycle::world = nullptr;

TEST_F(Lifecycle, PauseFreezesTheGuestAndResumeKeepsItsMemory) {
    auto id = world->sourceId;
    auto uptime = [&] { return std::stod(run(id, "cut -d' ' -f1 /proc/uptime").stdoutData); };
    world->controller->pause("t", id);
    EXPECT_EQ(world->hypervisor->domainState(SandboxController::domainName(id)),
              DomainState::paused);
    EXPECT_EQ(test::codeOf([&] { run(id, "true"); }), ErrorCode::conflict);
    world->controller->resume("t", id);
    double before = uptime();
    world->controller->pause("t", id);
    std::this_thread::sleep_for(3s);
    world->controller->resume("t", id);
    double after = uptime();
    // The guest's clock stops with its vCPUs: 3 s of pause barely count.
    EXPECT_LT(after - before, 2.5) << "uptime went from " << before << " to " << after;
    EXPECT_EQ(run(id, "cat /dev/shm/marker").stdoutData, world->marker);
}

TEST_F(Lifecycle, ClonesCarryTheSnapshotsMemoryButNotItsIdentity) {
    auto c1 = clone();
    auto c2 = clone();
    EXPECT_EQ(run(c1.id, "cat /dev/shm/marker").stdoutData, world->marker);
    EXPECT_EQ(run(c2.id, "cat /dev/shm/marker").stdoutData, world->marker);
    run(c1.id, "echo clone-one > /dev/shm/marker");
    EXPECT_EQ(run(c2.id, "cat /dev/shm/marker").stdoutData, world->marker)
        << "clones share nothing";
    EXPECT_EQ(run(world->sourceId, "cat /dev/shm/marker").stdoutData, world->marker);

    // Fresh entropy in each (the kernel CRNG is reseeded from the host).
    std::string r1 = run(c1.id, "head -c 32 /dev/urandom | od -An -tx1").stdoutData;
    std::string r2 = run(c2.id, "head -c 32 /dev/urandom | od -An -tx1").stdoutData;
    EXPECT_FALSE(r1.empty());
    EXPECT_NE(r1, r2);
    // The wall clock is the host's, not the snapshot's.
    auto guestNow = std::stoll(run(c1.id, "date +%s").stdoutData);
    EXPECT_NEAR(static_cast<double>(guestNow), static_cast<double>(nowUnixSeconds()), 5.0);
    // Different VMs: own names, UUIDs and agent sockets.
    EXPECT_EQ(test::countQemuProcesses(c1.id), 1);
    EXPECT_EQ(test::countQemuProcesses(c2.id), 1);
    world->controller->destroy("t", c1.id);
    world->controller->destroy("t", c2.id);
    EXPECT_EQ(test::countQemuProcesses(c1.id), 0);
}

TEST_F(Lifecycle, ASpareVmIsWaitingForTheNextClone) {
    ASSERT_TRUE(test::waitFor([&] { return world->controller->spareCount() >= 1; }, 60s))
        << "a snapshot of a disk-less template asks for a spare VM";
    auto c = clone();
    EXPECT_EQ(run(c.id, "cat /dev/shm/marker").stdoutData, world->marker);
    ASSERT_TRUE(test::waitFor([&] { return world->controller->spareCount() >= 1; }, 60s))
        << "and refills it";
    world->controller->destroy("t", c.id);
}

// CI runs 20 cycles; scripts/soak (AIRLOCK_LONG_TESTS=1) runs 50.
TEST_F(Lifecycle, FiftyCreateDeleteCyclesLeaveNothingBehind) {
    std::string root = world->dir.path();
    const int cycles = std::getenv("AIRLOCK_LONG_TESTS") ? 50 : 20;
    for (int i = 0; i < cycles; ++i) {
        auto c = clone();
        if (i % 10 == 0) {
            EXPECT_EQ(run(c.id, "cat /dev/shm/marker").stdoutData, world->marker);
        }
        world->controller->destroy("t", c.id);
        ASSERT_FALSE(fs::exists(root + "/sandboxes/" + c.id)) << "cycle " << i;
    }
    // What stays: the source sandbox and the spare VM(s); the libvirt logs of
    // the 50 clones are gone with them. The refill the last clone asked for
    // may still be starting: count once the spare worker is done.
    ASSERT_TRUE(test::waitFor([&] { return world->controller->sparesIdle(); }, 60s));
    std::size_t expected = 1 + world->controller->spareCount();
    EXPECT_EQ(entries(root + "/sandboxes"), expected);
    EXPECT_EQ(world->hypervisor->listDomains().size(), expected);
    EXPECT_EQ(test::countQemuProcesses(root), static_cast<int>(expected));
    EXPECT_LE(entries(root + "/libvirt/log/qemu"), expected);
}

TEST_F(Lifecycle, DebianTemplateFreezesItsDiskInLayersTheBaseNeverChanges) {
    auto tmpl = world->templates->find("debian");
    if (!tmpl) {
        GTEST_SKIP() << "the debian template is not built";
    }
    struct stat baseBefore {};
    ASSERT_EQ(::stat(tmpl->diskPath.c_str(), &baseBefore), 0);
    CreateSandboxRequest request;
    request.templateName = "debian";
    // One GiB more than the image: the guest's root grows to it at boot.
    const unsigned diskGib = static_cast<unsigned>((tmpl->diskSizeBytes >> 30) + 1);
    request.diskGib = diskGib;
    auto d = world->controller->create("t", request);
    auto tools = run(
        d.id, "python3 -c 'print(6*7)' && git --version >/dev/null && node -e 'console.log(1)'");
    EXPECT_EQ(tools.result.exit_code, 0) << tools.stderrData;
    EXPECT_EQ(tools.stdoutData, "42\n1\n");

    // disk_gib bounds the disk: the guest sees a root of that size and
    // ENOSPC past it, while the host's overlay stays small.
    auto rootSize = run(d.id, "df -B1 --output=size / | tail -1");
    std::uint64_t rootBytes = std::stoull(rootSize.stdoutData);
    EXPECT_GT(rootBytes, (std::uint64_t(diskGib) << 30) - (600ull << 20))
        << "the root filesystem grew to disk_gib";
    EXPECT_LE(rootBytes, std::uint64_t(diskGib) << 30);
    auto full = run(d.id,
                    "fallocate -l " + std::to_string(diskGib + 1) +
                        "G /var/tmp/too-big; rc=$?; rm -f /var/tmp/too-big; exit $rc",
                    "root");
    EXPECT_NE(full.result.exit_code, 0);
    EXPECT_NE(full.stderrData.find("No space left on device"), std::string::npos)
        << full.stderrData;
    auto fits = run(d.id, "fallocate -l 256M /var/tmp/fits && rm /var/tmp/fits && echo ok", "root");
    EXPECT_EQ(fits.stdoutData, "ok\n") << fits.stderrData;
    std::string overlay =
        world->dir.path() + "/sandboxes/" + d.id + "/" + world->store->find(d.id)->disk;
    struct stat overlayStat {};
    ASSERT_EQ(::stat(overlay.c_str(), &overlayStat), 0);
    EXPECT_LT(std::uint64_t(overlayStat.st_blocks) * 512, 1ull << 30)
        << "the host's overlay did not fill";
    run(d.id, "echo before-snapshot > ~/state && sync");
    auto snap = world->controller->snapshot("t", d.id);
    ASSERT_TRUE(snap.hasDisk);
    run(d.id, "echo after-snapshot > ~/state && sync");

    // A disk-backed snapshot has a spare of its own: a VM started on an
    // overlay of this snapshot's layer, holding its memory state.
    auto debianSpares = [&] {
        std::set<std::string> ids;
        for (const auto& r : world->store->list(TenantScope::all()))
            if (r.tenant == "_spare" && r.templateName == "debian") ids.insert(r.id);
        return ids;
    };
    ASSERT_TRUE(test::waitFor(
        [&] { return world->controller->sparesIdle() && debianSpares().size() == 1; }, 180s));
    auto spareIds = debianSpares();
    EXPECT_EQ(world->store->find(*spareIds.begin())->layers, snap.layers)
        << "the spare's disk reads the snapshot's layers (the GC keeps them)";

    CreateSandboxRequest fromSnap;
    fromSnap.snapshot = snap.id;
    auto c = world->controller->create("t", fromSnap);
    EXPECT_TRUE(spareIds.count(c.id)) << "the clone is the spare's VM";
    EXPECT_EQ(run(c.id, "cat ~/state").stdoutData, "before-snapshot\n");
    EXPECT_EQ(world->store->find(c.id)->diskBytes, std::uint64_t(diskGib) << 30)
        << "a clone keeps disk_gib";
    EXPECT_EQ(run(c.id, "df -B1 --output=size / | tail -1").stdoutData, rootSize.stdoutData);
    EXPECT_EQ(run(d.id, "cat ~/state").stdoutData, "after-snapshot\n");
    run(c.id, "echo clone > ~/state && sync");
    EXPECT_EQ(run(d.id, "cat ~/state").stdoutData, "after-snapshot\n");

    // The shared base stays root's, read-only and untouched.
    struct stat baseAfter {};
    ASSERT_EQ(::stat(tmpl->diskPath.c_str(), &baseAfter), 0);
    EXPECT_EQ(baseAfter.st_uid, 0u);
    EXPECT_EQ(baseAfter.st_mode, baseBefore.st_mode);
    EXPECT_EQ(baseAfter.st_mode & 0022, 0u) << "nobody but root may write the base";
    EXPECT_EQ(baseAfter.st_mtim.tv_sec, baseBefore.st_mtim.tv_sec);
    std::string layer = world->dir.path() + "/snapshots/" + snap.id + "/disk.qcow2";
    struct stat layerStat {};
    ASSERT_EQ(::stat(layer.c_str(), &layerStat), 0);
    EXPECT_EQ(layerStat.st_uid, 0u);
    EXPECT_EQ(layerStat.st_mode & 0777, 0444u);

    // Each QEMU is its own uid: the clone's cannot read the source's overlay.
    auto dRecord = *world->store->find(d.id), cRecord = *world->store->find(c.id);
    ASSERT_GT(cRecord.qemuUid, 0);
    std::string dOverlay = world->dir.path() + "/sandboxes/" + d.id + "/" + dRecord.disk;
    EXPECT_FALSE(reachableAs(static_cast<unsigned>(cRecord.qemuUid), dOverlay));
    EXPECT_TRUE(reachableAs(static_cast<unsigned>(dRecord.qemuUid), dOverlay))
        << "its own QEMU must open it";
    EXPECT_TRUE(reachableAs(static_cast<unsigned>(cRecord.qemuUid), layer))
        << "a clone reads its frozen layer";

    // Deleting the snapshot keeps the layer its clone reads; the clone's
    // delete takes it.
    world->controller->deleteSnapshot("t", snap.id);
    EXPECT_TRUE(debianSpares().empty()) << "a deleted snapshot's spare goes with it";
    EXPECT_TRUE(fs::exists(layer));
    EXPECT_EQ(run(c.id, "cat ~/state").stdoutData, "clone\n");
    world->controller->destroy("t", c.id);
    world->controller->destroy("t", d.id);
    EXPECT_FALSE(fs::exists(world->dir.path() + "/snapshots/" + snap.id));
}

TEST_F(Lifecycle, EachQemuRunsAsItsOwnUidAndReachesNothingOfAnother) {
    auto c = clone();
    auto source = *world->store->find(world->sourceId), copy = *world->store->find(c.id);
    ASSERT_GT(source.qemuUid, 0);
    ASSERT_GT(copy.qemuUid, 0);
    EXPECT_NE(source.qemuUid, copy.qemuUid);
    EXPECT_EQ(qemuUidOf(source.id), source.qemuUid);
    EXPECT_EQ(qemuUidOf(copy.id), copy.qemuUid);
    auto other = static_cast<unsigned>(copy.qemuUid);
    std::string dir = world->dir.path() + "/sandboxes/" + source.id;
    EXPECT_FALSE(reachableAs(other, dir)) << "another sandbox's QEMU lists this sandbox's dir";
    EXPECT_FALSE(reachableAs(other, dir + "/console.log"));
    EXPECT_FALSE(reachableAs(other, dir + "/agent.sock"))
        << "another sandbox's QEMU reaches this agent";
    std::string memory = world->dir.path() + "/snapshots/" + world->snapshotId + "/memory.state";
    ASSERT_TRUE(fs::exists(memory));
    EXPECT_FALSE(reachableAs(other, memory)) << "a snapshot's memory is root's alone";
    EXPECT_FALSE(reachableAs(static_cast<unsigned>(source.qemuUid), memory));
    world->controller->destroy("t", c.id);
}

TEST_F(Lifecycle, ASnapshotWhoseFilesChangedIsNotRestored) {
    auto s = world->controller->snapshot("t", world->sourceId);
    std::string memory = world->dir.path() + "/snapshots/" + s.id + "/memory.state";
    {
        // One byte flipped in the middle (root can; a disk fault could).
        std::fstream f(memory, std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(static_cast<std::streamoff>(fs::file_size(memory) / 2));
        char b = 0;
        f.read(&b, 1);
        f.seekp(static_cast<std::streamoff>(fs::file_size(memory) / 2));
        b = static_cast<char>(b ^ 0x5a);
        f.write(&b, 1);
    }
    CreateSandboxRequest r;
    r.snapshot = s.id;
    EXPECT_EQ(test::codeOf([&] { world->controller->create("t", r); }), ErrorCode::conflict);
    world->controller->deleteSnapshot("t", s.id);
}

}  // namespace
}  // namespace airlock

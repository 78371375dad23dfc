// Pause/resume, snapshots, clones, timeouts and the snapshot GC over the fake
// hypervisor (real agents in-process, real qemu-img overlays).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "ControllerFixture.hpp"
#include "controller/DiskLayers.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::codeOf;

using SandboxLifecycleTest = test::ControllerFixture;

CreateSandboxRequest fromTemplate(const std::string& name) {
    CreateSandboxRequest r;
    r.templateName = name;
    return r;
}

CreateSandboxRequest fromSnapshot(const std::string& id) {
    CreateSandboxRequest r;
    r.snapshot = id;
    return r;
}

std::size_t entries(const std::string& dir) {
    std::size_t n = 0;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         it != fs::recursive_directory_iterator(); ++it)
        ++n;
    return n;
}

TEST_F(SandboxLifecycleTest, PauseAndResumeRecordTheStateAndGateExec) {
    auto r = controller->create("t1", CreateSandboxRequest{});
    auto domain = SandboxController::domainName(r.id);
    EXPECT_EQ(controller->pause("t1", r.id).state, SandboxState::paused);
    EXPECT_EQ(hypervisor.domainState(domain), DomainState::paused);
    EXPECT_EQ(store->find(r.id)->state, SandboxState::paused);
    EXPECT_EQ(controller->pause("t1", r.id).state, SandboxState::paused)
        << "pausing twice is harmless";
    ExecOptions o;
    o.argv = {"true"};
    o.user = "root";  // the in-process agent runs on the host
    EXPECT_EQ(codeOf([&] { controller->commands().exec("t1", r.id, o); }), ErrorCode::conflict);
    EXPECT_EQ(codeOf([&] { controller->pause("t2", r.id); }), ErrorCode::not_found);
    EXPECT_EQ(controller->resume("t1", r.id).state, SandboxState::running);
    EXPECT_EQ(hypervisor.domainState(domain), DomainState::running);
    EXPECT_EQ(controller->commands().exec("t1", r.id, o).result.exit_code, 0);
}

// E2B's filesystem-only pause: no VM while paused, a fresh boot (a new agent
// session) on resume, the disk kept; the state survives a restart.
TEST_F(SandboxLifecycleTest, APauseWithoutMemoryShutsTheVmOffAndTheResumeBootsIt) {
    auto r = controller->create("t1", fromTemplate("disky"));
    auto domain = SandboxController::domainName(r.id);
    const int startsBefore = hypervisor.starts.load();
    const std::size_t agentsBefore = agents.size();
    auto paused = controller->pause("t1", r.id, PauseKind::disk_only);
    EXPECT_EQ(paused.state, SandboxState::paused);
    EXPECT_TRUE(paused.pausedWithoutMemory);
    EXPECT_EQ(hypervisor.domainState(domain), DomainState::missing) << "no VM while paused";
    EXPECT_TRUE(store->find(r.id)->pausedWithoutMemory);
    EXPECT_TRUE(fs::exists(dir.path() + "/sandboxes/" + r.id + "/" + r.disk)) << "the disk stays";

    ControllerConfig config;
    config.dataDir = dir.path();
    auto restarted = makeController(config);
    restarted->recover();
    EXPECT_EQ(store->find(r.id)->state, SandboxState::paused)
        << "a VM shut off by the pause is not a VM lost";
    EXPECT_EQ(codeOf([&] { controller->snapshot("t1", r.id); }), ErrorCode::conflict)
        << "no VM to capture";

    auto resumed = controller->resume("t1", r.id);
    EXPECT_EQ(resumed.state, SandboxState::running);
    EXPECT_FALSE(resumed.pausedWithoutMemory);
    EXPECT_FALSE(store->find(r.id)->pausedWithoutMemory);
    EXPECT_EQ(hypervisor.domainState(domain), DomainState::running);
    EXPECT_EQ(hypervisor.starts.load(), startsBefore + 1) << "the resume booted a VM";
    EXPECT_EQ(agents.size(), agentsBefore + 1) << "with a session of its own";
    ExecOptions o;
    o.argv = {"true"};
    o.user = "root";
    EXPECT_EQ(controller->commands().exec("t1", r.id, o).result.exit_code, 0);
    // A pause with memory afterwards is the usual one again.
    EXPECT_FALSE(controller->pause("t1", r.id).pausedWithoutMemory);
    EXPECT_EQ(hypervisor.domainState(domain), DomainState::paused);
}

TEST_F(SandboxLifecycleTest, APauseWithoutMemoryNeedsADisk) {
    auto r = controller->create("t1", CreateSandboxRequest{});
    ASSERT_TRUE(r.disk.empty());
    EXPECT_EQ(codeOf([&] { controller->pause("t1", r.id, PauseKind::disk_only); }),
              ErrorCode::bad_request);
    EXPECT_EQ(store->find(r.id)->state, SandboxState::running);
    EXPECT_EQ(hypervisor.domainState(SandboxController::domainName(r.id)), DomainState::running);
    // Nor can a timeout ask for one: refused at create, not failed at
    // every sweep while the sandbox runs past its end.
    CreateSandboxRequest onTimeout;
    onTimeout.onTimeout = TimeoutAction::pause_disk_only;
    EXPECT_EQ(codeOf([&] { controller->create("t1", onTimeout); }), ErrorCode::bad_request);
}

// The guest is root in itself and can make its sync fail: a timeout that
// asked for a pause without memory then pauses it with its memory, which
// the guest cannot refuse. It never runs on past its end.
TEST_F(SandboxLifecycleTest, ATimeoutPauseWithoutMemoryThatTheGuestFailsPausesWithIt) {
    auto request = fromTemplate("disky");
    request.timeoutS = 60;
    request.onTimeout = TimeoutAction::pause_disk_only;
    auto r = controller->create("t1", request);
    store->updateTimeout(r.id, 60, nowUnixSeconds() - 1);
    // The in-process agent runs the host's commands: a sync that fails first on PATH.
    test::TempDir bin;
    {
        std::ofstream fake(bin.path() + "/sync");
        fake << "#!/bin/sh\nexit 1\n";
    }
    fs::permissions(bin.path() + "/sync", fs::perms(0755));
    std::string oldPath = std::getenv("PATH") ? std::getenv("PATH") : "";
    ::setenv("PATH", (bin.path() + ":" + oldPath).c_str(), 1);
    controller->enforceTimeouts();
    ::setenv("PATH", oldPath.c_str(), 1);
    auto after = store->find(r.id);
    ASSERT_TRUE(after);
    EXPECT_EQ(after->state, SandboxState::paused);
    EXPECT_FALSE(after->pausedWithoutMemory);
    EXPECT_EQ(after->expiresAt, 0);
    EXPECT_EQ(hypervisor.domainState(SandboxController::domainName(r.id)), DomainState::paused);
    auto events = controller->audit("t1", r.id, AuditQuery{"sandbox.timeout", "", 0, 10});
    ASSERT_EQ(events.size(), 1u);
    EXPECT_NE(events[0].dataJson.find("with memory"), std::string::npos) << events[0].dataJson;
}

// A fork (settingsFrom) runs under its source's rules, whatever the request
// carries: a clone must never run under fewer rules than what it copies.
TEST_F(SandboxLifecycleTest, AForkTakesItsSourcesSettingsNotTheRequests) {
    CreateSandboxRequest asked;
    asked.metadata = {{"k", "v"}};
    asked.env = {{"MODE", "strict"}};
    asked.policy.deny = {"curl *"};
    asked.policy.approve = {"git push*"};
    asked.secrets["TOKEN"] = SecretSpec{"fork-Secret-5120", {}};
    asked.onTimeout = TimeoutAction::pause;
    asked.portAccess = PortAccess::token;
    asked.packages = packages::PackageRulesChange::parse(
        nlohmann::json::parse(R"({"npm":{"min_age_days":9}})"));
    auto src = controller->create("t1", asked);
    auto snap = controller->snapshot("t1", src.id);

    auto bare = fromSnapshot(snap.id);
    bare.metadata = {{"other", "x"}};
    bare.settingsFrom = src.id;
    auto fork = controller->create("t1", bare);
    EXPECT_EQ(fork.policyJson, src.policyJson);
    EXPECT_EQ(fork.envJson, src.envJson);
    EXPECT_EQ(fork.metadataJson, src.metadataJson) << "the source's, not the request's";
    EXPECT_EQ(fork.packagesJson, src.packagesJson);
    EXPECT_EQ(fork.onTimeout, "pause");
    EXPECT_EQ(fork.portAccess, "token");
    EXPECT_EQ(fork.secretNames, src.secretNames);
    EXPECT_NE(fork.secretsSealed, src.secretsSealed) << "sealed again for the fork's id";
    ExecOptions o;
    o.argv = {"/bin/sh", "-c", "test \"$TOKEN\" = fork-Secret-5120 && test \"$MODE\" = strict"};
    o.user = "root";  // the in-process agent runs on the host
    EXPECT_EQ(controller->commands().exec("t1", fork.id, o).result.exit_code, 0);
    ExecOptions denied;
    denied.argv = {"curl", "http://x"};
    denied.user = "root";
    EXPECT_EQ(codeOf([&] { controller->commands().exec("t1", fork.id, denied); }),
              ErrorCode::policy_denied);
    bool audited = false;
    for (const auto& e : controller->audit("t1", fork.id, AuditQuery{}))
        audited = audited || (e.type == "sandbox.created" &&
                              nlohmann::json::parse(e.dataJson)["settings_from"] == src.id);
    EXPECT_TRUE(audited) << "the record says whose settings it took";

    // Only a source of the same tenant.
    auto foreign = fromSnapshot(snap.id);
    foreign.settingsFrom = "sbx-nope";
    EXPECT_EQ(codeOf([&] { controller->create("t1", foreign); }), ErrorCode::not_found);
}

TEST_F(SandboxLifecycleTest, SnapshotOfAMemoryOnlySandboxAndItsClones) {
    auto src = controller->create("t1", CreateSandboxRequest{});
    auto snap = controller->snapshot("t1", src.id);
    EXPECT_EQ(snap.state, SnapshotState::ready);
    EXPECT_FALSE(snap.hasDisk);
    EXPECT_EQ(hypervisor.domainState(SandboxController::domainName(src.id)), DomainState::running)
        << "a running source goes on after the snapshot";
    std::string sdir = dir.path() + "/snapshots/" + snap.id;
    EXPECT_TRUE(fs::exists(sdir + "/memory.state"));
    auto manifest = nlohmann::json::parse(std::ifstream(sdir + "/manifest.json"));
    EXPECT_EQ(manifest["template"]["digest"], "sha256:test");
    EXPECT_EQ(manifest["files"][0]["name"], "memory.state");
    EXPECT_EQ(manifest["files"][0]["sha256"].get<std::string>().size(), 64u);

    auto c1 = controller->create("t1", fromSnapshot(snap.id));
    auto c2 = controller->create("t1", fromSnapshot(snap.id));
    EXPECT_NE(c1.id, c2.id);
    EXPECT_EQ(c1.snapshotId, snap.id);
    auto& spec1 = hypervisor.spec(SandboxController::domainName(c1.id));
    auto& spec2 = hypervisor.spec(SandboxController::domainName(c2.id));
    EXPECT_TRUE(spec1.incoming);
    EXPECT_NE(spec1.uuid, spec2.uuid);
    EXPECT_NE(spec1.agentSocketPath, spec2.agentSocketPath);
    EXPECT_EQ(hypervisor.domainState(spec1.name), DomainState::running) << "restored, then resumed";
    ExecOptions o;
    o.argv = {"true"};
    o.user = "root";  // the in-process agent runs on the host
    EXPECT_EQ(controller->commands().exec("t1", c1.id, o).result.exit_code, 0);

    // Another tenant sees nothing; a clone cannot change the resources.
    EXPECT_EQ(codeOf([&] { controller->create("t2", fromSnapshot(snap.id)); }),
              ErrorCode::not_found);
    auto bigger = fromSnapshot(snap.id);
    bigger.memoryMib = 512;
    EXPECT_EQ(codeOf([&] { controller->create("t1", bigger); }), ErrorCode::bad_request);
    EXPECT_EQ(controller->snapshots().list("t1").size(), 1u);
    EXPECT_TRUE(controller->snapshots().list("t2").empty());

    controller->deleteSnapshot("t1", snap.id);
    EXPECT_EQ(codeOf([&] { controller->snapshots().get("t1", snap.id); }), ErrorCode::not_found);
    EXPECT_FALSE(fs::exists(sdir)) << "without a disk layer nothing has to wait for the clones";
    for (const auto& id : {src.id, c1.id, c2.id}) controller->destroy("t1", id);
    EXPECT_EQ(entries(dir.path() + "/sandboxes"), 0u);
    EXPECT_EQ(entries(dir.path() + "/snapshots"), 0u);
    EXPECT_EQ(hypervisor.count(), 0u);
}

TEST_F(SandboxLifecycleTest, DiskGibSizesEveryOverlayOfASandboxAndItsClones) {
    auto sized = fromTemplate("disky");
    sized.diskGib = 3;
    auto src = controller->create("t1", sized);
    EXPECT_EQ(src.diskBytes, 3 * kGiB);
    EXPECT_EQ(store->find(src.id)->diskBytes, 3 * kGiB) << "recorded";
    std::string sdir = dir.path() + "/sandboxes/";
    EXPECT_EQ(qcow2VirtualSize(sdir + src.id + "/disk-0.qcow2"), 3 * kGiB)
        << "the guest's disk is disk_gib";
    auto snap = controller->snapshot("t1", src.id);
    EXPECT_EQ(qcow2VirtualSize(sdir + src.id + "/disk-1.qcow2"), 3 * kGiB)
        << "the overlay after a snapshot too";
    auto clone = controller->create("t1", fromSnapshot(snap.id));
    EXPECT_EQ(clone.diskBytes, 3 * kGiB) << "a clone keeps its snapshot's size";
    EXPECT_EQ(qcow2VirtualSize(sdir + clone.id + "/disk-0.qcow2"), 3 * kGiB);
    auto resized = fromSnapshot(snap.id);
    resized.diskGib = 4;
    EXPECT_EQ(codeOf([&] { controller->create("t1", resized); }), ErrorCode::bad_request);

    auto plain = controller->create("t1", fromTemplate("disky"));
    EXPECT_EQ(plain.diskBytes, 1 * kGiB) << "default: the template's size, in whole GiB";
    for (const auto& id : {src.id, clone.id, plain.id}) controller->destroy("t1", id);
    controller->deleteSnapshot("t1", snap.id);
}

TEST_F(SandboxLifecycleTest, DiskGibIsValidatedAndMustFitAboveTheFreeSpaceFloor) {
    auto diskless = fromTemplate("minimal");
    diskless.diskGib = 2;
    EXPECT_EQ(codeOf([&] { controller->create("t1", diskless); }), ErrorCode::bad_request)
        << "a template without a disk has no disk_gib";
    auto zero = fromTemplate("disky");
    zero.diskGib = 0;
    EXPECT_EQ(codeOf([&] { controller->create("t1", zero); }), ErrorCode::bad_request);
    auto huge = fromTemplate("disky");
    huge.diskGib = 257;  // the default maximum is 256
    EXPECT_EQ(codeOf([&] { controller->create("t1", huge); }), ErrorCode::bad_request);

    // A floor just under today's free space: a 1 GiB disk fits above it only
    // if the floor leaves room; a disk larger than the room is refused (507)
    // before anything is started or recorded.
    struct statvfs st {};
    ASSERT_EQ(::statvfs(dir.path().c_str(), &st), 0);
    std::uint64_t freeMib = static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize / (1024 * 1024);
    ASSERT_GT(freeMib, 8192u) << "this test needs some free space";
    ControllerConfig config;
    config.dataDir = dir.path();
    config.minFreeDiskMib = freeMib - 4096;  // about 4 GiB of room
    controller = makeController(config);
    auto tooBig = fromTemplate("disky");
    tooBig.diskGib = 16;
    EXPECT_EQ(codeOf([&] { controller->create("t1", tooBig); }), ErrorCode::insufficient_storage);
    EXPECT_EQ(hypervisor.count(), 0u);
    EXPECT_TRUE(store->list(TenantScope::all()).empty());
    auto fits = fromTemplate("disky");
    fits.diskGib = 1;
    auto r = controller->create("t1", fits);
    controller->destroy("t1", r.id);
}

TEST_F(SandboxLifecycleTest, DiskLayersAreFrozenSharedAndCollectedWithTheirLastReader) {
    auto src = controller->create("t1", fromTemplate("disky"));
    EXPECT_EQ(src.disk, "disk-0.qcow2");
    auto snap = controller->snapshot("t1", src.id);
    ASSERT_TRUE(snap.hasDisk);
    std::string layer = dir.path() + "/snapshots/" + snap.id + "/disk.qcow2";
    ASSERT_TRUE(fs::exists(layer));
    EXPECT_EQ(fs::status(layer).permissions() & fs::perms::all, fs::perms(0444))
        << "a frozen layer is read-only";
    auto after = store->find(src.id);
    EXPECT_EQ(after->disk, "disk-1.qcow2") << "the source goes on writing a new overlay";
    EXPECT_EQ(hypervisor.spec(SandboxController::domainName(src.id)).diskPath,
              dir.path() + "/sandboxes/" + src.id + "/disk-1.qcow2");

    auto clone = controller->create("t1", fromSnapshot(snap.id));
    EXPECT_EQ(store->find(clone.id)->layers, std::vector<std::string>{snap.id});
    // A snapshot of the clone chains onto the first layer.
    auto second = controller->snapshot("t1", clone.id);
    EXPECT_EQ(second.layers, (std::vector<std::string>{snap.id, second.id}));

    // Deleting the first snapshot hides it but keeps the layer its readers need.
    controller->deleteSnapshot("t1", snap.id);
    EXPECT_TRUE(controller->snapshots().list("t1").size() == 1u);
    EXPECT_TRUE(fs::exists(layer));
    controller->destroy("t1", src.id);
    controller->destroy("t1", clone.id);
    EXPECT_TRUE(fs::exists(layer)) << "the second snapshot still reads it";
    controller->deleteSnapshot("t1", second.id);
    EXPECT_FALSE(fs::exists(layer));
    EXPECT_EQ(entries(dir.path() + "/snapshots"), 0u);
    EXPECT_EQ(entries(dir.path() + "/sandboxes"), 0u);
    EXPECT_TRUE(snapshots->list(TenantScope::all()).empty());
}

TEST_F(SandboxLifecycleTest, AFailedSnapshotResumesTheSourceAndLeavesNothing) {
    auto src = controller->create("t1", CreateSandboxRequest{});
    hypervisor.failNextSave();
    EXPECT_EQ(codeOf([&] { controller->snapshot("t1", src.id); }), ErrorCode::hypervisor_error);
    EXPECT_EQ(hypervisor.domainState(SandboxController::domainName(src.id)), DomainState::running);
    EXPECT_TRUE(snapshots->list(TenantScope::all()).empty());
    EXPECT_EQ(entries(dir.path() + "/snapshots"), 0u);
}

TEST_F(SandboxLifecycleTest, SnapshotOfAPausedSandboxLeavesItPaused) {
    auto src = controller->create("t1", CreateSandboxRequest{});
    controller->pause("t1", src.id);
    auto snap = controller->snapshot("t1", src.id);
    EXPECT_EQ(snap.state, SnapshotState::ready);
    EXPECT_EQ(hypervisor.domainState(SandboxController::domainName(src.id)), DomainState::paused);
    EXPECT_EQ(store->find(src.id)->state, SandboxState::paused);
}

TEST_F(SandboxLifecycleTest, TimeoutsKillOrPauseAndCanBeExtended) {
    CreateSandboxRequest killed;
    killed.timeoutS = 60;
    auto k = controller->create("t1", killed);
    EXPECT_GT(k.expiresAt, nowUnixSeconds());
    CreateSandboxRequest paused;
    paused.timeoutS = 60;
    paused.onTimeout = TimeoutAction::pause;
    auto p = controller->create("t1", paused);
    CreateSandboxRequest forever;
    forever.timeoutS = 0;
    auto f = controller->create("t1", forever);
    EXPECT_EQ(f.expiresAt, 0);

    controller->enforceTimeouts();
    EXPECT_EQ(store->list(TenantScope::all()).size(), 3u) << "nothing has expired yet";
    store->updateTimeout(k.id, 60, nowUnixSeconds() - 1);
    store->updateTimeout(p.id, 60, nowUnixSeconds() - 1);
    controller->enforceTimeouts();
    EXPECT_FALSE(store->find(k.id)) << "on_timeout=kill deletes the sandbox";
    EXPECT_EQ(hypervisor.domainState(SandboxController::domainName(k.id)), DomainState::missing);
    EXPECT_EQ(store->find(p.id)->state, SandboxState::paused);
    EXPECT_EQ(store->find(p.id)->expiresAt, 0) << "a paused-by-timeout sandbox waits for its owner";
    EXPECT_EQ(store->find(f.id)->state, SandboxState::running);

    auto extended = controller->setTimeout("t1", p.id, 600);
    EXPECT_EQ(extended.timeoutS, 600);
    EXPECT_EQ(extended.expiresAt, 0) << "a paused sandbox's clock starts when it wakes";
    EXPECT_GE(controller->resume("t1", p.id).expiresAt, nowUnixSeconds() + 599);
    EXPECT_GE(controller->setTimeout("t1", p.id, 900).expiresAt, nowUnixSeconds() + 899);
    EXPECT_EQ(codeOf([&] { controller->setTimeout("t1", p.id, -1); }), ErrorCode::bad_request);
    // An action the request cannot name is refused where it is parsed.
    EXPECT_EQ(codeOf([&] { timeoutActionFrom("explode"); }), ErrorCode::bad_request);
}

// Hibernate: the memory state goes to a root-owned file and the VM goes;
// the state survives a restart; a resume restores it (a new session) and
// the file goes.
TEST_F(SandboxLifecycleTest, HibernateWritesTheMemoryAwayAndTheResumeRestoresIt) {
    auto r = controller->create("t1", CreateSandboxRequest{});
    auto domain = SandboxController::domainName(r.id);
    const int loadsBefore = hypervisor.loads.load();
    auto h = controller->pause("t1", r.id, PauseKind::hibernate);
    EXPECT_EQ(h.state, SandboxState::paused);
    EXPECT_TRUE(h.hibernated);
    EXPECT_EQ(h.pauseReason, "requested");
    EXPECT_EQ(hypervisor.domainState(domain), DomainState::missing) << "no VM while hibernated";
    std::string state = dir.path() + "/hibernated/" + r.id + ".state";
    EXPECT_TRUE(fs::exists(state));
    EXPECT_EQ(codeOf([&] { controller->snapshot("t1", r.id); }), ErrorCode::conflict);

    ControllerConfig config;
    config.dataDir = dir.path();
    auto restarted = makeController(config);
    restarted->recover();
    EXPECT_EQ(store->find(r.id)->state, SandboxState::paused) << "hibernated is not a VM lost";
    EXPECT_TRUE(store->find(r.id)->hibernated);

    auto resumed = controller->resume("t1", r.id);
    EXPECT_EQ(resumed.state, SandboxState::running);
    EXPECT_FALSE(resumed.hibernated);
    EXPECT_EQ(hypervisor.domainState(domain), DomainState::running);
    EXPECT_EQ(hypervisor.loads.load(), loadsBefore + 1) << "its state was loaded back";
    EXPECT_FALSE(fs::exists(state));
    ExecOptions o;
    o.argv = {"true"};
    o.user = "root";
    EXPECT_EQ(controller->commands().exec("t1", r.id, o).result.exit_code, 0);
    // Paused with its memory, it may still give the memory up.
    controller->pause("t1", r.id);
    auto deeper = controller->pause("t1", r.id, PauseKind::hibernate);
    EXPECT_TRUE(deeper.hibernated);
    EXPECT_EQ(hypervisor.domainState(domain), DomainState::missing);
    controller->destroy("t1", r.id);
    EXPECT_FALSE(fs::exists(state)) << "a delete takes its memory state with it";
}

// Sleep when idle: a sandbox with no traffic past its idle rule is paused
// (saying why); a call that needs it running wakes it when it has
// auto_resume, and says how long that took.
TEST_F(SandboxLifecycleTest, AnIdleSandboxSleepsAndACallWakesIt) {
    CreateSandboxRequest q;
    q.idle = IdleRule{1, IdleAction::pause};
    q.autoResume = true;
    q.timeoutS = 600;
    auto r = controller->create("t1", q);
    CreateSandboxRequest busy;
    busy.idle = IdleRule{3600, IdleAction::pause};
    auto b = controller->create("t1", busy);
    auto deadline = steadyMillis() + 15'000;
    while (store->find(r.id)->state != SandboxState::paused && steadyMillis() < deadline) {
        controller->enforceTimeouts();
        std::this_thread::sleep_for(100ms);
    }
    auto slept = store->find(r.id);
    ASSERT_EQ(slept->state, SandboxState::paused);
    EXPECT_EQ(slept->pauseReason, "idle");
    EXPECT_EQ(slept->expiresAt, 0) << "the timeout clock stops while it sleeps";
    EXPECT_EQ(store->find(b.id)->state, SandboxState::running) << "not idle for an hour yet";

    ExecOptions o;
    o.argv = {"echo", "awake"};
    o.user = "root";
    auto out = controller->commands().exec("t1", r.id, o);
    EXPECT_EQ(out.stdoutData, "awake\n");
    auto woken = store->find(r.id);
    EXPECT_EQ(woken->state, SandboxState::running);
    EXPECT_GE(woken->expiresAt, nowUnixSeconds() + 590) << "and starts again whole on the wake";
    auto events = controller->audit("t1", r.id, AuditQuery{});
    EXPECT_TRUE(std::any_of(events.begin(), events.end(),
                            [](const AuditEvent& e) { return e.type == "sandbox.woken"; }));
    EXPECT_EQ(controller->wake("t1", r.id), 0) << "a running sandbox has nothing to wake";

    // Without auto_resume a sleeping sandbox stays asleep for a call.
    controller->pause("t1", b.id);
    EXPECT_EQ(codeOf([&] { controller->commands().exec("t1", b.id, o); }), ErrorCode::conflict);
}

// A command still running when its sandbox goes (its timeout, a delete)
// fails at once and says why: a conflict, not "guest gone".
TEST_F(SandboxLifecycleTest, ACommandRunningWhenItsSandboxExpiresFailsSayingWhy) {
    CreateSandboxRequest req;
    req.timeoutS = 60;
    auto r = controller->create("t1", req);
    std::string marker = dir.path() + "/started";
    ExecOptions o;
    o.shell = "touch " + marker + "; sleep 20";
    o.user = "root";  // the in-process agent runs on the host
    auto running = std::async(std::launch::async, [&] {
        try {
            controller->commands().exec("t1", r.id, o);
            return std::string("finished");
        } catch (const Error& e) {
            return std::string(errorCodeName(e.code())) + ": " + e.what();
        }
    });
    ASSERT_TRUE(test::waitFor([&] { return fs::exists(marker); }, 10s, 10ms));
    store->updateTimeout(r.id, 60, nowUnixSeconds() - 1);
    controller->enforceTimeouts();
    ASSERT_EQ(running.wait_for(5s), std::future_status::ready)
        << "the command outlived its sandbox";
    EXPECT_EQ(running.get(),
              "conflict: sandbox " + r.id + " is gone: its timeout passed (timeout_s)");
    EXPECT_FALSE(store->find(r.id));
}

TEST_F(SandboxLifecycleTest, RecoverFinishesAPauseAndDropsAHalfTakenSnapshot) {
    auto a = controller->create("t1", CreateSandboxRequest{});
    auto b = controller->create("t1", CreateSandboxRequest{});
    // a: the pause was written, the VM never suspended. b: a snapshot paused
    // it and the controller died before resuming.
    store->updateState(a.id, SandboxState::paused);
    hypervisor.suspendDomain(SandboxController::domainName(b.id));
    SnapshotRecord half;
    half.id = "snap-aaaaaaaaaaaaaaaaaaaa";
    half.tenant = "t1";
    half.sourceSandbox = b.id;
    half.createdAt = nowTimestamp();
    snapshots->insert(half);
    fs::create_directories(dir.path() + "/snapshots/" + half.id);
    std::ofstream(dir.path() + "/snapshots/" + half.id + "/memory.state") << "partial";
    fs::create_directories(dir.path() + "/snapshots/snap-orphanorphanorphan00");

    ControllerConfig config;
    config.dataDir = dir.path();
    auto restarted = makeController(config);
    restarted->recover();
    EXPECT_EQ(hypervisor.domainState(SandboxController::domainName(a.id)), DomainState::paused);
    EXPECT_EQ(hypervisor.domainState(SandboxController::domainName(b.id)), DomainState::running);
    EXPECT_TRUE(snapshots->list(TenantScope::all()).empty());
    EXPECT_EQ(entries(dir.path() + "/snapshots"), 0u);
}

TEST_F(SandboxLifecycleTest, WarmTemplateCreatesRestoreAndColdStaysAvailable) {
    controller->warmTemplate("minimal");
    EXPECT_TRUE(controller->hasWarmSnapshot("minimal"));
    EXPECT_TRUE(controller->snapshots().list("t1").empty()) << "warm snapshots belong to no tenant";
    EXPECT_TRUE(store->list(TenantScope::all()).empty())
        << "the sandbox that was snapshotted is gone";
    auto warm = controller->create("t1", CreateSandboxRequest{});
    EXPECT_TRUE(hypervisor.spec(SandboxController::domainName(warm.id)).incoming);
    CreateSandboxRequest cold;
    cold.boot = BootMode::cold;
    auto c = controller->create("t1", cold);
    EXPECT_FALSE(hypervisor.spec(SandboxController::domainName(c.id)).incoming);
    CreateSandboxRequest needsWarm = fromTemplate("disky");
    needsWarm.boot = BootMode::warm;
    EXPECT_EQ(codeOf([&] { controller->create("t1", needsWarm); }), ErrorCode::conflict);
    controller->warmTemplate("minimal");  // idempotent
    EXPECT_EQ(snapshots->list(TenantScope::all()).size(), 1u);
}

}  // namespace
}  // namespace airlock

namespace airlock {
namespace {

class SparePoolTest : public test::ControllerFixture {
  protected:
    SparePoolTest() { controller = makeController(sparesConfig()); }
    ControllerConfig sparesConfig() {
        ControllerConfig config;
        config.dataDir = dir.path();
        config.sparesPerShape = 1;
        config.spareDelayForLive = std::chrono::milliseconds(300);
        return config;
    }
};

TEST_F(SparePoolTest, ALiveSandboxOrSnapshotKeepsASpareVmThatTheNextCloneTakes) {
    auto src = controller->create("t1", CreateSandboxRequest{});
    // A fork usually follows its snapshot at once: the spare is started for
    // the live sandbox's shape, before any snapshot.
    ASSERT_TRUE(
        test::waitFor([&] { return controller->spareCount() == 1; }, std::chrono::seconds(10)));
    // The spare is a paused domain waiting for state, invisible to tenants.
    EXPECT_EQ(hypervisor.count(), 2u);
    EXPECT_EQ(controller->list("t1").size(), 1u);
    std::string spareDomain;
    for (const auto& name : hypervisor.listDomains())
        if (name != SandboxController::domainName(src.id)) spareDomain = name;
    EXPECT_TRUE(hypervisor.spec(spareDomain).incoming);

    auto snap = controller->snapshot("t1", src.id);
    CreateSandboxRequest fromSnap;
    fromSnap.snapshot = snap.id;
    auto clone = controller->create("t1", fromSnap);
    EXPECT_EQ(SandboxController::domainName(clone.id), spareDomain) << "the clone is the spare";
    EXPECT_EQ(store->find(clone.id)->tenant, "t1");
    EXPECT_EQ(hypervisor.domainState(spareDomain), DomainState::running);
    ASSERT_TRUE(
        test::waitFor([&] { return controller->spareCount() == 1; }, std::chrono::seconds(10)))
        << "and a new spare takes its place";

    // The snapshot gone, live sandboxes of the shape still keep a spare.
    controller->deleteSnapshot("t1", snap.id);
    ASSERT_TRUE(
        test::waitFor([&] { return controller->spareCount() == 1 && controller->sparesIdle(); },
                      std::chrono::seconds(10)));
    controller->destroy("t1", src.id);
    EXPECT_EQ(controller->spareCount(), 1u) << "the clone is still live";
    // Nothing of that shape left: no spare either.
    controller->destroy("t1", clone.id);
    EXPECT_EQ(controller->spareCount(), 0u);
    EXPECT_EQ(hypervisor.count(), 0u);
    EXPECT_TRUE(store->list(TenantScope::all()).empty());
}

TEST_F(SparePoolTest, ACloneThatTakesASpareKeepsItsSecretsUnderTheSparesId) {
    auto src = controller->create("t1", CreateSandboxRequest{});
    ASSERT_TRUE(
        test::waitFor([&] { return controller->spareCount() == 1; }, std::chrono::seconds(10)));
    std::string spareDomain;
    for (const auto& name : hypervisor.listDomains())
        if (name != SandboxController::domainName(src.id)) spareDomain = name;
    auto snap = controller->snapshot("t1", src.id);
    CreateSandboxRequest fromSnap;
    fromSnap.snapshot = snap.id;
    fromSnap.secrets["TOKEN"] = SecretSpec{"clone-Secret-7731", {}};
    auto clone = controller->create("t1", fromSnap);
    ASSERT_EQ(SandboxController::domainName(clone.id), spareDomain) << "the clone is the spare";
    // Sealed for the id the clone has now (the spare's): the command gets it.
    ExecOptions o;
    o.argv = {"/bin/sh", "-c", "test \"$TOKEN\" = clone-Secret-7731 && echo \"got $TOKEN\""};
    o.user = "root";  // the in-process agent runs on the host
    auto out = controller->commands().exec("t1", clone.id, o);
    EXPECT_EQ(out.result.exit_code, 0) << out.stderrData;
    EXPECT_EQ(out.stdoutData, "got ***\n");
    controller->destroy("t1", clone.id);
    controller->destroy("t1", src.id);
    controller->deleteSnapshot("t1", snap.id);
}

TEST_F(SparePoolTest, ACloneRightAfterTheSnapshotWaitsForTheSpareOnItsWay) {
    hypervisor.startDelayMs = 1000;  // a spare takes a while to start
    auto src = controller->create("t1", CreateSandboxRequest{});
    auto snap = controller->snapshot("t1", src.id);
    ASSERT_EQ(controller->spareCount(), 0u) << "the spare is still on its way";
    CreateSandboxRequest fromSnap;
    fromSnap.snapshot = snap.id;
    auto clone = controller->create("t1", fromSnap);
    EXPECT_NE(hypervisor.startedBy(SandboxController::domainName(clone.id)),
              std::this_thread::get_id())
        << "the clone took the spare the worker started, not a VM of its own";
    controller->destroy("t1", clone.id);
    controller->destroy("t1", src.id);
    controller->deleteSnapshot("t1", snap.id);
    EXPECT_EQ(hypervisor.count(), 0u);
}

TEST_F(SparePoolTest, ASnapshotsStateIsLoadedIntoASpareAheadOfItsClones) {
    auto src = controller->create("t1", CreateSandboxRequest{});
    auto snap = controller->snapshot("t1", src.id);
    std::string state = dir.path() + "/snapshots/" + snap.id + "/memory.state";
    ASSERT_TRUE(
        test::waitFor([&] { return hypervisor.loads.load() == 1 && controller->sparesIdle(); },
                      std::chrono::seconds(10)))
        << "the worker loads the snapshot into the spare";
    CreateSandboxRequest fromSnap;
    fromSnap.snapshot = snap.id;
    for (int i = 0; i < 2; ++i) {
        int loadsBefore = hypervisor.loads.load();
        auto clone = controller->create("t1", fromSnap);
        std::string domain = SandboxController::domainName(clone.id);
        EXPECT_EQ(hypervisor.loadedFrom(domain), state)
            << "clone " << i << " has the snapshot's state";
        EXPECT_NE(hypervisor.loadedBy(domain), std::this_thread::get_id())
            << "the clone loaded nothing itself: the spare worker did, before it was asked for";
        EXPECT_EQ(hypervisor.domainState(domain), DomainState::running);
        // The next clone of the same snapshot finds it loaded again (perhaps already).
        ASSERT_TRUE(test::waitFor(
            [&] { return hypervisor.loads.load() == loadsBefore + 1 && controller->sparesIdle(); },
            std::chrono::seconds(10)));
    }
    // A damaged state file never reaches a spare: the check that guards a
    // restore guards the preload too (the spare's start is slowed so that
    // the damage comes first).
    hypervisor.startDelayMs = 1000;
    auto other = controller->snapshot("t1", src.id);
    std::string otherState = dir.path() + "/snapshots/" + other.id + "/memory.state";
    ::chmod(otherState.c_str(), 0644);
    std::ofstream(otherState, std::ios::app) << "tampered";
    ASSERT_TRUE(test::waitFor([&] { return controller->sparesIdle(); }, std::chrono::seconds(10)));
    for (const auto& name : hypervisor.listDomains())
        EXPECT_NE(hypervisor.loadedFrom(name), otherState) << name;
}

TEST_F(SparePoolTest, ADeletedSnapshotsStateLeavesTheSparesAndAnotherSnapshotRestoresOnItsOwn) {
    auto src = controller->create("t1", CreateSandboxRequest{});
    auto a = controller->snapshot("t1", src.id);
    ASSERT_TRUE(
        test::waitFor([&] { return hypervisor.loads.load() == 1 && controller->sparesIdle(); },
                      std::chrono::seconds(10)));
    // The latest snapshot of the shape wins the spare.
    auto b = controller->snapshot("t1", src.id);
    std::string stateA = dir.path() + "/snapshots/" + a.id + "/memory.state";
    std::string stateB = dir.path() + "/snapshots/" + b.id + "/memory.state";
    ASSERT_TRUE(
        test::waitFor([&] { return hypervisor.loads.load() == 2 && controller->sparesIdle(); },
                      std::chrono::seconds(10)));
    std::string spareB;
    for (const auto& name : hypervisor.listDomains())
        if (hypervisor.loadedFrom(name) == stateB) spareB = name;
    ASSERT_FALSE(spareB.empty());
    EXPECT_EQ(controller->spareCount(), 1u);
    // A clone of A never takes the spare holding B.
    CreateSandboxRequest fromA;
    fromA.snapshot = a.id;
    auto cloneA = controller->create("t1", fromA);
    EXPECT_EQ(hypervisor.loadedFrom(SandboxController::domainName(cloneA.id)), stateA);
    EXPECT_NE(SandboxController::domainName(cloneA.id), spareB);
    controller->destroy("t1", cloneA.id);
    ASSERT_TRUE(test::waitFor([&] { return controller->sparesIdle(); }, std::chrono::seconds(10)));
    // Deleting a snapshot removes every spare holding its memory; the live
    // source keeps a spare without state for its shape.
    for (const auto& snap : {a.id, b.id}) controller->deleteSnapshot("t1", snap);
    for (const auto& name : hypervisor.listDomains()) {
        EXPECT_NE(hypervisor.loadedFrom(name), stateA) << name;
        EXPECT_NE(hypervisor.loadedFrom(name), stateB) << name;
    }
    ASSERT_TRUE(
        test::waitFor([&] { return controller->spareCount() == 1 && controller->sparesIdle(); },
                      std::chrono::seconds(10)));
    controller->destroy("t1", src.id);
    EXPECT_EQ(hypervisor.count(), 0u);
}

TEST_F(SparePoolTest, AShortLivedSandboxNeverCostsASpare) {
    auto src = controller->create("t1", CreateSandboxRequest{});
    controller->destroy("t1", src.id);  // within the 300 ms the spare waits for
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    EXPECT_EQ(hypervisor.starts.load(), 1) << "only the sandbox's own VM was started";
    EXPECT_EQ(controller->spareCount(), 0u);
}

TEST_F(SparePoolTest, ADeleteWaitsForASpareStillStartingAndLeavesNoVm) {
    controller.reset();
    ControllerConfig config = sparesConfig();
    config.spareDelayForLive = std::chrono::milliseconds(0);
    controller = makeController(config);
    hypervisor.startDelayMs = 800;
    auto src = controller->create("t1", CreateSandboxRequest{});
    ASSERT_TRUE(test::waitFor([&] { return hypervisor.startsInFlight.load() == 1; },
                              std::chrono::seconds(10)))
        << "the spare is starting";
    controller->destroy("t1", src.id);
    EXPECT_EQ(hypervisor.startsInFlight.load(), 0) << "the delete waited for the spare's start";
    EXPECT_EQ(hypervisor.count(), 0u) << "and removed it: no VM left";
    EXPECT_EQ(controller->spareCount(), 0u);
}

TEST_F(SparePoolTest, ShutdownRemovesSparesAndRecoverRemovesThoseOfACrash) {
    auto src = controller->create("t1", CreateSandboxRequest{});
    controller->snapshot("t1", src.id);
    ASSERT_TRUE(
        test::waitFor([&] { return controller->spareCount() == 1; }, std::chrono::seconds(10)));
    // A crash: the controller is gone without shutdown(); its spare's row is
    // still "creating", so the next start removes it.
    ControllerConfig config;
    config.dataDir = dir.path();
    auto next = makeController(config);
    next->recover();
    EXPECT_EQ(hypervisor.count(), 1u) << "only the source remains";
    EXPECT_EQ(store->list(TenantScope::all()).size(), 1u);

    ControllerConfig spares = config;
    spares.sparesPerShape = 1;
    auto third = makeController(spares);
    third->snapshot("t1", src.id);
    ASSERT_TRUE(test::waitFor([&] { return third->spareCount() == 1; }, std::chrono::seconds(10)));
    third->shutdown();
    EXPECT_EQ(third->spareCount(), 0u);
    EXPECT_EQ(hypervisor.count(), 1u);
}

}  // namespace
}  // namespace airlock

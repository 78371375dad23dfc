#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "ControllerFixture.hpp"
#include "controller/SandboxController.hpp"
#include "core/Error.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
namespace fs = std::filesystem;
using test::ControllerFixture;

using test::codeOf;

ExecOptions rootShell(const std::string& s) {
    ExecOptions o;
    o.shell = s;
    o.user = "root";
    return o;
}

using SandboxControllerTest = ControllerFixture;

TEST_F(SandboxControllerTest, CreateBootsAndPersistsARunningSandbox) {
    auto r = controller->create("t1", CreateSandboxRequest{});
    EXPECT_EQ(r.state, SandboxState::running);
    EXPECT_TRUE(isValidId(r.id, "sbx-"));
    EXPECT_EQ(hypervisor.count(), 1u);
    auto& spec = hypervisor.spec(SandboxController::domainName(r.id));
    EXPECT_EQ(spec.agentSocketPath, dir.path() + "/sandboxes/" + r.id + "/agent.sock");
    EXPECT_EQ(spec.kernelPath, "/k");
    EXPECT_TRUE(fs::is_directory(dir.path() + "/sandboxes/" + r.id));
    EXPECT_EQ(store->find(r.id)->state, SandboxState::running);
}

TEST_F(SandboxControllerTest, TheTcgCacheIsTheTemplatesOwnElseTheDaemonDefault) {
    auto plain = controller->create("t1", CreateSandboxRequest{});
    EXPECT_EQ(hypervisor.spec(SandboxController::domainName(plain.id)).tcgCacheMib,
              ControllerConfig{}.tcgCacheMib);
    EXPECT_TRUE(hypervisor.spec(SandboxController::domainName(plain.id)).freePageReporting);
    CreateSandboxRequest disky;
    disky.templateName = "disky";
    auto own = controller->create("t1", disky);
    EXPECT_EQ(hypervisor.spec(SandboxController::domainName(own.id)).tcgCacheMib, 48u);
}

TEST_F(SandboxControllerTest, ResourcesBecomeHostLimitsAndEachSandboxItsOwnUid) {
    ControllerConfig config;
    config.dataDir = dir.path();
    config.memoryOverheadMib = 256;
    config.diskBytesPerSecond = 1 << 20;
    config.diskOpsPerSecond = 100;
    config.qemuUidBase = 410000;
    config.qemuUidCount = 2;
    controller = makeController(config);
    CreateSandboxRequest two;
    two.vcpus = 2;
    two.memoryMib = 512;
    auto a = controller->create("t1", two);
    auto& spec = hypervisor.spec(SandboxController::domainName(a.id));
    EXPECT_EQ(spec.cpuQuotaPercent, 200u) << "vcpus become a quota";
    EXPECT_EQ(spec.memoryLimitMib, 512u + 256u) << "guest memory plus QEMU's own";
    EXPECT_EQ(spec.diskBytesPerSecond, 1u << 20);
    EXPECT_EQ(spec.diskOpsPerSecond, 100u);
    ASSERT_TRUE(spec.runAs);
    EXPECT_EQ(spec.runAs->first, 410000u);
    auto b = controller->create("t1", CreateSandboxRequest{});
    EXPECT_EQ(hypervisor.spec(SandboxController::domainName(b.id)).runAs->first, 410001u);
    EXPECT_EQ(fs::status(dir.path() + "/sandboxes/" + b.id).permissions() & fs::perms::all,
              fs::perms(0700));
    struct stat st {};
    ::stat((dir.path() + "/sandboxes/" + b.id).c_str(), &st);
    EXPECT_EQ(st.st_uid, 410001u) << "its directory is its QEMU's";
    EXPECT_EQ(codeOf([&] { controller->create("t1", CreateSandboxRequest{}); }),
              ErrorCode::unavailable)
        << "the uid range is used up";
    controller->destroy("t1", a.id);
    auto c = controller->create("t1", CreateSandboxRequest{});
    EXPECT_EQ(hypervisor.spec(SandboxController::domainName(c.id)).runAs->first, 410000u)
        << "a freed uid comes back";
    auto limits = controller->enforcedLimits();
    EXPECT_TRUE(limits.cpuQuota);
    EXPECT_TRUE(limits.ownUidPerSandbox);
}

TEST_F(SandboxControllerTest, LowDiskRefusesCreatesSnapshotsAndUploadsBeforeTheyStart) {
    auto r = controller->create("t1", CreateSandboxRequest{});
    ControllerConfig config;
    config.dataDir = dir.path();
    config.minFreeDiskMib = 1ull << 40;  // more than any disk has
    controller = makeController(config);
    auto before = hypervisor.count();
    EXPECT_EQ(codeOf([&] { controller->create("t1", CreateSandboxRequest{}); }),
              ErrorCode::insufficient_storage);
    EXPECT_EQ(hypervisor.count(), before) << "nothing was started";
    EXPECT_EQ(store->list(TenantScope::all()).size(), 1u) << "nothing was recorded";
    EXPECT_EQ(codeOf([&] { controller->snapshot("t1", r.id); }), ErrorCode::insufficient_storage);
    EXPECT_EQ(codeOf([&] { controller->files().openUpload("t1", r.id, "/tmp/x", std::nullopt); }),
              ErrorCode::insufficient_storage);
    EXPECT_TRUE(snapshots->list(TenantScope::all()).empty());
}

TEST_F(SandboxControllerTest, ValidatesTemplateAndResources) {
    CreateSandboxRequest bad;
    bad.templateName = "nope";
    EXPECT_EQ(codeOf([&] { controller->create("t1", bad); }), ErrorCode::not_found);
    CreateSandboxRequest big;
    big.vcpus = 99;
    EXPECT_EQ(codeOf([&] { controller->create("t1", big); }), ErrorCode::bad_request);
    CreateSandboxRequest tiny;
    tiny.memoryMib = 1;
    EXPECT_EQ(codeOf([&] { controller->create("t1", tiny); }), ErrorCode::bad_request);
    EXPECT_EQ(hypervisor.count(), 0u);
    EXPECT_TRUE(store->list(TenantScope::all()).empty());
}

TEST_F(SandboxControllerTest, FailedBootLeavesNothingBehind) {
    failConnect = true;
    EXPECT_EQ(codeOf([&] { controller->create("t1", CreateSandboxRequest{}); }),
              ErrorCode::agent_timeout);
    EXPECT_EQ(hypervisor.count(), 0u) << "the domain must be destroyed";
    EXPECT_TRUE(store->list(TenantScope::all()).empty());
    EXPECT_TRUE(fs::is_empty(dir.path() + "/sandboxes"));
    failConnect = false;
    hypervisor.failNextStart();
    EXPECT_EQ(codeOf([&] { controller->create("t1", CreateSandboxRequest{}); }),
              ErrorCode::hypervisor_error);
    EXPECT_TRUE(store->list(TenantScope::all()).empty());
    EXPECT_TRUE(fs::is_empty(dir.path() + "/sandboxes"));
}

TEST_F(SandboxControllerTest, ExecUsesSandboxEnvUnderRequestEnv) {
    CreateSandboxRequest req;
    req.env = {{"A", "from-sandbox"}, {"B", "from-sandbox"}};
    auto r = controller->create("t1", req);
    auto o = rootShell("echo $A $B");
    o.env = {{"B", "from-request"}};
    auto out = controller->commands().exec("t1", r.id, o);
    EXPECT_EQ(out.stdoutData, "from-sandbox from-request\n");
}

TEST_F(SandboxControllerTest, OutputCapComesFromConfig) {
    auto r = controller->create("t1", CreateSandboxRequest{});
    auto out = controller->commands().exec("t1", r.id, rootShell("head -c 100000 /dev/zero"));
    EXPECT_EQ(out.stdoutData.size(), 4096u);
    EXPECT_TRUE(out.truncated);
}

TEST_F(SandboxControllerTest, OtherTenantsSeeNothing) {
    auto r = controller->create("t1", CreateSandboxRequest{});
    EXPECT_EQ(codeOf([&] { controller->get("t2", r.id); }), ErrorCode::not_found);
    EXPECT_EQ(codeOf([&] { controller->commands().exec("t2", r.id, rootShell("true")); }),
              ErrorCode::not_found);
    EXPECT_EQ(codeOf([&] { controller->destroy("t2", r.id); }), ErrorCode::not_found);
    EXPECT_TRUE(controller->list("t2").empty());
    EXPECT_EQ(controller->list("t1").size(), 1u);
}

TEST_F(SandboxControllerTest, DestroyRemovesDomainFilesAndRecord) {
    auto r = controller->create("t1", CreateSandboxRequest{});
    controller->destroy("t1", r.id);
    EXPECT_EQ(hypervisor.count(), 0u);
    EXPECT_FALSE(fs::exists(dir.path() + "/sandboxes/" + r.id));
    EXPECT_EQ(codeOf([&] { controller->get("t1", r.id); }), ErrorCode::not_found);
    EXPECT_EQ(codeOf([&] { controller->commands().exec("t1", r.id, rootShell("true")); }),
              ErrorCode::not_found);
}

TEST_F(SandboxControllerTest, ExecOnStoppedSandboxIsConflict) {
    auto r = controller->create("t1", CreateSandboxRequest{});
    store->updateState(r.id, SandboxState::stopped);
    EXPECT_EQ(codeOf([&] { controller->commands().exec("t1", r.id, rootShell("true")); }),
              ErrorCode::conflict);
}

TEST_F(SandboxControllerTest, ReconnectsWhenTheAgentConnectionDied) {
    auto r = controller->create("t1", CreateSandboxRequest{});
    agents.clear();  // the guest agent goes away (killed, restarted)
    EXPECT_TRUE(
        test::waitFor([&] { return controller->liveConnections() == 0; }, std::chrono::seconds(5)));
    auto out = controller->commands().exec("t1", r.id, rootShell("echo again"));
    EXPECT_EQ(out.stdoutData, "again\n");
    EXPECT_EQ(connectedSockets.size(), 2u);
}

TEST_F(SandboxControllerTest, AGuestFloodingItsHelloIsAuditedAsAProtocolError) {
    auto r = controller->create("t1", CreateSandboxRequest{});
    agents.clear();
    EXPECT_TRUE(
        test::waitFor([&] { return controller->liveConnections() == 0; }, std::chrono::seconds(5)));
    floodConnect = true;
    EXPECT_EQ(codeOf([&] { controller->commands().exec("t1", r.id, rootShell("true")); }),
              ErrorCode::agent_error);
    auto events = controller->audit("t1", r.id, AuditQuery{});
    auto it = std::find_if(events.begin(), events.end(),
                           [](const auto& e) { return e.type == "agent.protocol_error"; });
    ASSERT_NE(it, events.end());
    EXPECT_NE(it->dataJson.find("without answering its hello"), std::string::npos) << it->dataJson;
}

TEST_F(SandboxControllerTest, RecoverFinishesHalfDoneWorkAndKillsOrphans) {
    auto kept = controller->create("t1", CreateSandboxRequest{});
    auto vanished = controller->create("t1", CreateSandboxRequest{});
    auto halfCreated = controller->create("t1", CreateSandboxRequest{});
    auto halfDeleted = controller->create("t1", CreateSandboxRequest{});
    store->updateState(halfCreated.id, SandboxState::creating);
    store->updateState(halfDeleted.id, SandboxState::deleting);
    hypervisor.vanish(SandboxController::domainName(vanished.id));
    hypervisor.addOrphan("airlock-sbx-orphanorphanorphan12");
    hypervisor.addOrphan("somebody-elses-vm");
    fs::create_directories(dir.path() + "/sandboxes/sbx-strayyyyyyyyyyyyyyyy");

    // A new controller over the same store, as after a SIGKILL.
    ControllerConfig config;
    config.dataDir = dir.path();
    auto restarted = makeController(config);
    restarted->recover();

    EXPECT_EQ(store->find(kept.id)->state, SandboxState::running);
    EXPECT_EQ(store->find(vanished.id)->state, SandboxState::stopped);
    EXPECT_FALSE(store->find(halfCreated.id));
    EXPECT_FALSE(store->find(halfDeleted.id));
    auto domains = hypervisor.listDomains();
    EXPECT_EQ(domains, (std::vector<std::string>{SandboxController::domainName(kept.id),
                                                 "somebody-elses-vm"}));
    EXPECT_FALSE(fs::exists(dir.path() + "/sandboxes/sbx-strayyyyyyyyyyyyyyyy"));
    EXPECT_FALSE(fs::exists(dir.path() + "/sandboxes/" + halfCreated.id));
    EXPECT_TRUE(fs::exists(dir.path() + "/sandboxes/" + kept.id));
    // The adopted sandbox is usable through the new controller.
    EXPECT_EQ(restarted->commands().exec("t1", kept.id, rootShell("echo adopted")).stdoutData, "adopted\n");
}

}  // namespace
}  // namespace airlock

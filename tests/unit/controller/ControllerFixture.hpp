#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <cstdlib>
#include <list>
#include <stdexcept>

#include "agentclient/AgentProtocolError.hpp"
#include "controller/SandboxController.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "store/Database.hpp"
#include "support/FakeHypervisor.hpp"
#include "support/InProcessAgent.hpp"
#include "support/TestEnv.hpp"

namespace airlock::test {

// A controller over the fake hypervisor whose "guests" are in-process agents.
class ControllerFixture : public ::testing::Test {
protected:
    ControllerFixture() {
        // A template with a disk needs a real qcow2 base: overlays are made
        // with qemu-img, whatever the hypervisor.
        std::string base = dir.path() + "/base.qcow2";
        if (std::system(("qemu-img create -q -f qcow2 " + base + " 64M").c_str()) != 0)
            throw std::runtime_error("qemu-img create failed");
        templates = std::make_unique<TemplateCatalog>(std::vector<TemplateInfo>{
            TemplateInfo{"minimal", "/k", "/i", "console=ttyS0", 1, 256, "sha256:test", "6.1", "", 0, 0},
            TemplateInfo{"disky", "/k", "/i", "console=ttyS0", 1, 256, "sha256:disk", "6.1", base, 64 << 20, 48}});
        db = std::make_unique<Database>(dir.path() + "/state.db");
        store = std::make_unique<SandboxStore>(*db);
        ports = std::make_unique<PortStore>(*db);
        snapshots = std::make_unique<SnapshotStore>(*db);
        gatedExecs = std::make_unique<GatedExecStore>(*db);
        auditStore = std::make_unique<AuditStore>(*db);
        ControllerConfig config;
        config.dataDir = dir.path();
        config.execOutputCap = 4096;
        controller = makeController(config);
    }

    std::unique_ptr<SandboxController> makeController(ControllerConfig config) {
        // A fixed test key: secrets are sealed like in airlockd.
        std::array<unsigned char, 32> key{};
        key.fill(7);
        if (!config.secretCipher) config.secretCipher = std::make_shared<const SecretCipher>(key);
        return makeControllerAsIs(config);
    }

    std::unique_ptr<SandboxController> makeControllerAsIs(const ControllerConfig& config) {
        return std::make_unique<SandboxController>(
            config, hypervisor, ControllerStores{*store, *ports, *snapshots, *gatedExecs, *auditStore}, *templates,
            [this](const std::string& socketPath, std::chrono::milliseconds) -> std::shared_ptr<AgentConnection> {
                connectedSockets.push_back(socketPath);
                if (failConnect) throw Error(ErrorCode::agent_timeout, "fake agent never answered");
                if (floodConnect) throw AgentProtocolError("the agent sent 17 MiB without answering its hello");
                agents.emplace_back();
                return agents.back().connect();
            });
    }

    TempDir dir;
    FakeHypervisor hypervisor;
    std::unique_ptr<TemplateCatalog> templates;
    std::unique_ptr<Database> db;
    std::unique_ptr<SandboxStore> store;
    std::unique_ptr<PortStore> ports;
    std::unique_ptr<SnapshotStore> snapshots;
    std::unique_ptr<GatedExecStore> gatedExecs;
    std::unique_ptr<AuditStore> auditStore;
    std::list<InProcessAgent> agents;
    std::vector<std::string> connectedSockets;
    bool failConnect = false;
    bool floodConnect = false;  // the guest floods its channel instead of a hello
    std::unique_ptr<SandboxController> controller;
};

}  // namespace airlock::test

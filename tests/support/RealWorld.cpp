#include "support/RealWorld.hpp"

#include "agentclient/AgentConnection.hpp"
#include "agentclient/AgentTransport.hpp"
#include "hypervisor/AccelProbe.hpp"
#include "support/BuildPaths.hpp"
#include "support/TestEnv.hpp"

namespace airlock::test {

RealWorld::RealWorld(ControllerConfig config, const std::string& templatesDir) {
    seedHypervisorCache(dir.path());
    hypervisor = std::make_unique<LibvirtHypervisor>(LibvirtOptions{"", dir.path(), resolveAccel("auto")});
    keepHypervisorCache(dir.path());
    templates = std::make_unique<TemplateCatalog>(templatesDir.empty() ? test::templatesDir()
                                                                       : templatesDir);
    db = std::make_unique<Database>(dir.path() + "/state.db");
    store = std::make_unique<SandboxStore>(*db);
    ports = std::make_unique<PortStore>(*db);
    snapshots = std::make_unique<SnapshotStore>(*db);
    gatedExecs = std::make_unique<GatedExecStore>(*db);
    audit = std::make_unique<AuditStore>(*db);
    config.dataDir = dir.path();
    controller = std::make_unique<SandboxController>(
        config, *hypervisor, ControllerStores{*store, *ports, *snapshots, *gatedExecs, *audit}, *templates,
        connectAgent);
}

RealWorld::~RealWorld() {
    // Sandboxes first (their agents, spares), then libvirt.
    controller.reset();
    hypervisor.reset();
}

}  // namespace airlock::test

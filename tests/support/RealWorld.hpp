#pragma once
#include <memory>

#include "controller/SandboxController.hpp"
#include "hypervisor/LibvirtHypervisor.hpp"
#include "store/Database.hpp"
#include "support/TestEnv.hpp"

namespace airlock::test {

// A controller over the real libvirt backend (embedded driver in a temp dir),
// the built templates and real agent connections: the base of the real-VM
// tests and the benchmarks. One per process (libvirt's embedded driver opens
// a single root per process).
class RealWorld {
public:
    // config.dataDir is set to the world's temp dir; templatesDir: the
    // built ones (build/templates) unless given.
    explicit RealWorld(ControllerConfig config = {}, const std::string& templatesDir = "");
    ~RealWorld();
    RealWorld(const RealWorld&) = delete;
    RealWorld& operator=(const RealWorld&) = delete;

    TempDir dir;
    std::unique_ptr<LibvirtHypervisor> hypervisor;
    std::unique_ptr<TemplateCatalog> templates;
    std::unique_ptr<Database> db;
    std::unique_ptr<SandboxStore> store;
    std::unique_ptr<PortStore> ports;
    std::unique_ptr<SnapshotStore> snapshots;
    std::unique_ptr<GatedExecStore> gatedExecs;
    std::unique_ptr<AuditStore> audit;
    std::unique_ptr<SandboxController> controller;
};

}  // namespace airlock::test

#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agentclient/AgentConnection.hpp"
#include "agentclient/AgentTransport.hpp"
#include "controller/ApprovalGates.hpp"
#include "controller/ApprovalRouter.hpp"
#include "controller/AuditRecorder.hpp"
#include "controller/CommandJudge.hpp"
#include "controller/CreateSandboxRequest.hpp"
#include "controller/DiskLayers.hpp"
#include "controller/FrontDoorServices.hpp"
#include "controller/HostStatus.hpp"
#include "controller/ExecOptions.hpp"
#include "controller/GuestFiles.hpp"
#include "controller/GuestPorts.hpp"
#include "controller/GuestProcesses.hpp"
#include "controller/SandboxAccess.hpp"
#include "controller/SandboxAgents.hpp"
#include "controller/SandboxCommands.hpp"
#include "controller/SandboxEvidenceSource.hpp"
#include "controller/SandboxHooks.hpp"
#include "controller/SandboxMoves.hpp"
#include "controller/SandboxNetwork.hpp"
#include "controller/Sandboxes.hpp"
#include "controller/SandboxSecrets.hpp"
#include "controller/SandboxVolumes.hpp"
#include "controller/SnapshotLibrary.hpp"
#include "controller/SparePool.hpp"
#include "controller/TemplateCatalog.hpp"
#include "controller/TenantLimits.hpp"
#include "controller/TenantSecrets.hpp"
#include "controller/UidPool.hpp"
#include "controller/VerifiedFiles.hpp"
#include "controller/WorkspaceSandboxes.hpp"
#include "controller/WorkspaceSpec.hpp"
#include "core/KeyedMutexes.hpp"
#include "core/LatencyHistogram.hpp"
#include "core/SafeFs.hpp"
#include "core/SecretCipher.hpp"
#include "core/SecretMasker.hpp"
#include "core/TimerQueue.hpp"
#include "egress/EgressGateway.hpp"
#include "hypervisor/Hypervisor.hpp"
#include "packages/PackageGateway.hpp"
#include "packages/PackageService.hpp"
#include "policy/CommandPolicy.hpp"
#include "protocol/GuestCalls.hpp"
#include "store/AuditStore.hpp"
#include "store/GatedExecStore.hpp"
#include "store/PortStore.hpp"
#include "store/SandboxStore.hpp"
#include "store/SnapshotStore.hpp"
#include "store/TenantStore.hpp"
#include "store/WorkspaceStore.hpp"

namespace airlock {

struct ControllerConfig {
    std::string dataDir;
    std::chrono::milliseconds bootTimeout{90'000};
    std::size_t execOutputCap = 1024 * 1024;
    std::string qemuUser =
        "libvirt-qemu";  // owns per-sandbox dirs (QEMU binds the agent socket there)
    unsigned maxVcpus = 8;
    unsigned maxMemoryMib = 16384;
    unsigned maxDiskGib = 256;
    // Tenants' rules, network bounds and quotas (none: no tenant has any).
    Tenants* tenants = nullptr;
    // A fleet's count of every tenant's sandboxes (none: this host counts its own).
    SharedUsage* sharedUsage = nullptr;
    AgentTransportKind transport = AgentTransportKind::serial;
    std::int64_t defaultTimeoutS = 300;  // for creates that name none; 0 = none
    std::int64_t maxTimeoutS = 7 * 24 * 3600;
    // Spare VMs per clone shape (template build + resources, no disk): QEMU
    // already started and waiting for a migration stream, so a clone skips
    // libvirt's start-up (about 1 s here). Kept only while a snapshot or a
    // live sandbox of that shape exists. 0 disables.
    unsigned sparesPerShape = 0;
    // A live sandbox's shape gets its spare this long after the create: a
    // sandbox deleted sooner never costs a VM start. 0 (the default): a
    // snapshot often follows a create within a second, and a fork at once;
    // the price is a spare start per lone create-run-delete (a delete waits
    // for a spare still starting, up to about a second here).
    std::chrono::milliseconds spareDelayForLive{0};
    policy::PolicyRules operatorRules;    // airlockd --policy FILE; every sandbox
    std::int64_t approvalTimeoutS = 900;  // a pending approval expires after this
    // Seals secrets at rest; without one, sandboxes cannot have secrets.
    std::shared_ptr<const SecretCipher> secretCipher;
    // Injected secrets each tenant defines for all its sandboxes (none:
    // sandboxes have only their creates').
    TenantSecrets* tenantSecrets = nullptr;
    // The host side of egress (airlockd's proxy). Without one, sandboxes
    // cannot be given a network allowlist.
    std::shared_ptr<egress::EgressGateway> egress;
    // The package proxy. Without one, guests have no package registry.
    std::shared_ptr<packages::PackageGateway> packages;
    // Each sandbox's QEMU runs as its own uid from [base, base + count) (as
    // root only; count 0: every QEMU runs as qemuUser).
    std::uint32_t qemuUidBase = 0;
    std::uint32_t qemuUidCount = 0;
    // Host resources per sandbox: vcpus become a CPU quota (cgroup); QEMU's
    // whole memory is capped at the guest's RAM plus this overhead (0: no
    // cap); its disk I/O is throttled (0: not). Below minFreeDiskMib free
    // in the data dir, creates, snapshots and uploads are refused (507).
    bool cpuQuota = true;
    std::uint64_t memoryOverheadMib = 512;
    std::uint64_t diskBytesPerSecond = 0;
    std::uint64_t diskOpsPerSecond = 0;
    std::uint64_t minFreeDiskMib = 0;
    // Memory levers handed to every domain (DomainSpec).
    unsigned tcgCacheMib = 16;
    bool freePageReporting = true;
    std::string memorySharing = "off";  // KSM as the daemon set it up (HostMemorySharing)
    unsigned maxVolumeGib = 1024;       // one volume's size
};


// What a tenant holds, against its quota.
// The stores the controller writes (one SQLite database in airlockd).
struct ControllerStores {
    SandboxStore& sandboxes;
    PortStore& ports;
    SnapshotStore& snapshots;
    GatedExecStore& gatedExecs;
    AuditStore& audit;
    // Workspace records follow their sandbox into snapshots and clones.
    WorkspaceStore* workspaces = nullptr;
    // Volumes (none: this server has no volumes).
    VolumeStore* volumes = nullptr;
};


// Owns the sandbox lifecycle: every state change is written to the store
// before it is acted on, so a restart can finish or undo it (recover()).
// All methods are synchronous and thread-safe; the API runs them on worker
// threads. A sandbox's files and processes are services of their own
// (files(), processes()) over the controller's SandboxAccess view; the
// evidence and workspace services reach it through evidenceSource() and
// workspaceSandboxes().
class SandboxController : private Sandboxes,
                          private SandboxSnapshots,
                          private HostStatus,
                          private SandboxAccess,
                          private SandboxEvidenceSource,
                          private WorkspaceSandboxes,
                          private SandboxMoves {
  public:
    SandboxController(ControllerConfig config, Hypervisor& hypervisor, ControllerStores stores,
                      const TemplateCatalog& templates, AgentConnector connector);
    ~SandboxController();

    SandboxRecord create(const std::string& tenant, const CreateSandboxRequest& request) override;
    SandboxRecord get(const std::string& tenant, const std::string& id) override;
    // A tenant's, or every tenant's (TenantScope::all(): never the internal
    // spares and warm sandboxes).
    std::vector<SandboxRecord> list(const TenantScope& scope) override;
    std::vector<SandboxRecord> list(const std::string& tenant) {
        return list(TenantScope::only(tenant));
    }
    // The tenant owning a sandbox (sbx-), snapshot (snap-) or approval
    // (apr-) id; nullopt for anything else or an internal object.
    std::optional<std::string> ownerOf(const std::string& id) override;
    // Tenants' records, usage, rule floors and quotas.
    TenantLimits& tenants() { return tenantLimits_; }
    // For /metrics: create latencies (REST exec's: commands().latency()),
    // and audit events by type (egress decisions, agent protocol errors,
    // approvals...).
    const LatencyHistogram& createLatency() const override { return createLatency_; }
    std::map<std::string, std::uint64_t> auditCounts() override { return auditLog_.counts(); }
    // Audit records made outside the controller (the egress proxy's) are
    // counted here too.
    void countAudit(const std::string& type) { auditLog_.count(type); }
    // `why` ends the message of calls still open on the sandbox ("sandbox
    // sbx-… is gone: <why>", a conflict).
    void destroy(const std::string& tenant, const std::string& id,
                 const std::string& why = "it was deleted") override;
    // Commands: the REST exec (run or parked for approval), the streamed
    // exec, approved runs, each judged by the command policy and audited.
    SandboxCommands& commands() { return commands_; }
    // A tenant's decision on one of its approvals (ApprovalGates::decide),
    // then what it lets through: an approved REST exec runs (SandboxCommands), a streamed
    // one's client is told, a push goes to the workspace service, a package
    // version is let through by the package proxy from then on.
    // `expectDigest`: the request digest the approver read (optional).
    GatedExec decideApproval(const std::string& tenant, const std::string& approvalId, bool approve,
                             const std::string& reason, const std::string& decidedBy,
                             const std::string& expectDigest = "") {
        return approvals_.decideApproval(tenant, approvalId, approve, reason, decidedBy,
                                         expectDigest);
    }
    // What waits for a human: parked commands, pushes and package versions.
    // A decision goes through decideApproval above (gates().decide alone
    // would record it and run nothing).
    ApprovalGates& gates() override { return gates_; }
    std::vector<AuditEvent> audit(const std::string& tenant, const std::string& sandboxId,
                                  const AuditQuery& query) override;
    std::vector<AuditEvent> auditFeed(const TenantScope& scope, std::int64_t after,
                                      int limit) override {
        return audit_.feed(scope, after, limit);
    }
    std::int64_t auditHead() override { return audit_.head(); }
    // The command policy as it applies to a sandbox's commands.
    const CommandJudge& commandJudge() const { return judge_; }

    // Replaces the egress allowlist of a running or paused sandbox;
    // connections opened from now on are judged by the new list.
    SandboxRecord setNetwork(const std::string& tenant, const std::string& id,
                             const std::vector<std::string>& allow) override;
    std::size_t applyTenantSecret(const std::string& tenant, const std::string& name) override;
    bool setSecret(const std::string& tenant, const std::string& id, const std::string& name,
                   const SecretSpec& secret) override;

    // Lifecycle (SandboxLifecycle.cpp).
    using Sandboxes::pause;
    // Without memory: the guest's disk is synced, its VM shut off (a sandbox
    // with no disk cannot: bad_request); its resume boots a VM from the disk.
    SandboxRecord pause(const std::string& tenant, const std::string& id,
                        PauseKind kind) override;
    SandboxRecord resume(const std::string& tenant, const std::string& id) override;
    std::int64_t wake(const std::string& tenant, const std::string& id) override;
    // Pauses (or hibernates) running sandboxes idle past their idle rule;
    // enforceTimeouts calls it with the sandboxes its sweep listed.
    void enforceIdle(const std::vector<SandboxRecord>& all);
    // Tenants' volumes (nullptr: the server keeps none).
    SandboxVolumes* volumes() { return volumes_.get(); }
    SandboxRecord setTimeout(const std::string& tenant, const std::string& id,
                             std::int64_t timeoutS) override;
    // Memory + device state, and the disk overlay frozen as a read-only
    // layer; a running sandbox is paused for the capture and goes on after.
    using SandboxSnapshots::snapshot;
    SnapshotRecord snapshot(const std::string& tenant, const std::string& id,
                            const SnapshotName& name) override;
    SnapshotRecord buildSnapshot(const std::string& tenant, const std::string& id,
                                 const std::string& kind) override;
    void deleteBuildSnapshot(const std::string& snapshotId) override;
    // A tenant's own template (a built one): the snapshot its sandboxes
    // clone and the env they get. Set once, before serving.
    struct UserTemplate {
        std::string snapshotId;
        std::map<std::string, std::string> env;
    };
    using UserTemplateLookup =
        std::function<std::optional<UserTemplate>(const std::string& tenant, const std::string& ref)>;
    void setUserTemplates(UserTemplateLookup lookup) { userTemplates_ = std::move(lookup); }
    // Snapshots as files and records: get, list, and their files' paths.
    SnapshotLibrary& snapshots() { return snapshotLibrary_; }
    // Hidden at once (SnapshotLibrary::remove); spares kept for its clones go.
    void deleteSnapshot(const std::string& tenant, const std::string& id) override;
    // Takes the ready snapshot of a template (boot, wait for the agent,
    // snapshot, destroy) unless one for its current digest exists.
    void warmTemplate(const std::string& templateName);
    bool hasWarmSnapshot(const std::string& templateName) override;
    // Kills or pauses sandboxes whose timeout passed; the daemon calls it
    // about once a second.
    void enforceTimeouts();
    // Stops the spare-VM worker and destroys the spares (clean shutdown;
    // after a crash recover() removes them).
    void shutdown();
    std::size_t spareCount() { return spares_->count(); }
    // No spare starting and none asked for: what a count of VMs can rely on.
    bool sparesIdle() { return spares_->idle(); }

    // Ownership + state check, then the sandbox's agent connection (one per
    // sandbox: virtio-serial takes one host at a time).
    std::shared_ptr<AgentConnection> runningAgent(const std::string& tenant,
                                                  const std::string& id) override;

    // A sandbox's files (uploads, downloads, operations, file activity),
    // its background processes, and its ports (previews, tunnels).
    GuestFiles& files() { return files_; }
    GuestProcesses& processes() { return processes_; }
    GuestPorts& ports() { return guestPorts_; }
    SandboxMetrics& metrics() { return metrics_; }
    // The lifecycle as the E2B doors use it, and no more.
    Sandboxes& sandboxes() { return *this; }
    SandboxAccess& access() { return *this; }
    // What the native API (and any front door) reaches, part by part.
    FrontDoorServices frontDoorServices() {
        return FrontDoorServices{*this,     *this,          snapshotLibrary_, commands_,
                                 gates_,    approvals_,     *this,            files_,
                                 processes_, guestPorts_,   tenantLimits_,    *this,
                                 metrics_,   volumes_.get()};
    }
    // What the evidence service reads of a sandbox, and no more.
    SandboxEvidenceSource& evidenceSource() { return *this; }
    // What the workspace service needs of it, and no more.
    WorkspaceSandboxes& workspaceSandboxes() { return *this; }
    // Sandboxes leaving for another host and arriving from one (a fleet's
    // drain with move; SandboxMoves.cpp).
    SandboxMoves& moves() { return *this; }

    // Workspaces (the workspace service sets these): a write through the
    // files API is checked against the sandbox's write scope (throws
    // Error(forbidden)); a decided publish approval (a push) goes back to the
    // service, on a thread of its own.
    using WriteGuard = WorkspaceSandboxes::WriteGuard;
    using PublishHandler = WorkspaceSandboxes::PublishHandler;
    void setWorkspaceHooks(WriteGuard guard, PublishHandler publish) override;
    // Evidence: called before a delete tears a sandbox down (it still runs:
    // a final bundle is sealed then) and after it is gone.
    void setPlacementHooks(SandboxHooks::Placed placed, SandboxHooks::AfterDelete gone) {
        hooks_.setPlacementHooks(std::move(placed), std::move(gone));
    }
    void setDeleteHooks(SandboxHooks::BeforeDelete before, SandboxHooks::AfterDelete after) {
        hooks_.setDeleteHooks(std::move(before), std::move(after));
    }
    // Host-only values of a sandbox (its tenant's git credentials, which the
    // guest is never given): masked in text the host writes (recordEvent,
    // hostTextMasker), never compared with guest output.
    using ExtraSecrets = WorkspaceSandboxes::ExtraSecrets;
    void setExtraSecrets(ExtraSecrets source) override {
        secrets_.setExtraSource(std::move(source));
    }
    void setWorkspaceTravel(PackWorkspace pack, ArriveWorkspace arrive) override {
        hooks_.setWorkspaceTravel(std::move(pack), std::move(arrive));
    }
    // Guest output (and what the agent chose): the sandbox's secrets only.
    SecretMasker guestOutputMasker(const SandboxRecord& r) const override;
    SecretMasker streamMasker(const SandboxRecord& r,
                              const std::string& commandText) const override;
    // Text the host writes: the secrets and the host-only values.
    SecretMasker hostTextMasker(const SandboxRecord& r) const;
    // The sandbox, owned and running (Error(conflict) when it is not).
    SandboxRecord requireRunning(const std::string& tenant, const std::string& id) override;
    // A record the host writes about a sandbox (workspace fetches, pushes,
    // evidence): masked with hostTextMasker.
    void recordEvent(const SandboxRecord& r, const std::string& type,
                     const nlohmann::json& data) override {
        auto masker = hostTextMasker(r);
        record(r.id, r.tenant, type, data, &masker);
    }

    // At start-up: finish half-done deletes, undo half-done creates, mark
    // sandboxes whose VM vanished, and destroy domains nobody owns.
    void recover();

    const TemplateCatalog& templates() const override { return templates_; }
    Accel accel() const override { return hypervisor_.accel(); }
    AgentTransportKind transport() const override { return config_.transport; }
    std::size_t liveConnections() { return agents_.live(); }
    EnforcedLimits enforcedLimits() const override;
    // Error(insufficient_storage) when the data dir's filesystem has less
    // free space than the configured floor; `what` names the refused action.
    // needBytes: what the action may still write (a new disk's full size).
    void requireFreeSpace(const std::string& what, std::uint64_t needBytes = 0) const override;

    static std::string domainName(const std::string& sandboxId) { return "airlock-" + sandboxId; }
    std::string sandboxDir(const std::string& id) const;
    static constexpr const char* kWarmTenant = "_warm";
    static constexpr const char* kSpareTenant = "_spare";

  private:
    SnapshotRecord takeSnapshot(const std::string& tenant, const std::string& id,
                                const SnapshotName& name, const std::string& kind);
    UserTemplateLookup userTemplates_;
    // create's work, before the fleet records where the sandbox lives.
    SandboxRecord launch(const std::string& tenant, const CreateSandboxRequest& request);
    SandboxRecord createFromSnapshot(const std::string& tenant, const CreateSandboxRequest& request,
                                     const SnapshotRecord& snap);
    SandboxRecord newRecord(const std::string& tenant, const CreateSandboxRequest& request,
                            const TemplateInfo& tmpl);
    // The request with a source sandbox's settings in place of its own.
    CreateSandboxRequest withSettingsOf(const SandboxRecord& source,
                                        CreateSandboxRequest request) const;
    DomainSpec domainSpec(const SandboxRecord& r, const TemplateInfo& tmpl);
    void failCreate(const std::string& id, const std::exception& e);
    void reseed(AgentConnection& agent);
    std::shared_ptr<std::mutex> lifecycleMutex(const std::string& id) {
        return lifecycleMutexes_.of(id);
    }
    // The template a paused sandbox's VM starts from again (Error(conflict)
    // when the server no longer has it; `how`: "boot", "restore").
    TemplateInfo templateToStart(const SandboxRecord& r, const char* how) const;
    // A pause without memory, and the boot that resumes it.
    void shutOff(const SandboxRecord& r);
    void bootPaused(const SandboxRecord& r);
    // pause/resume: running <-> paused, written before the VM is touched.
    // `stillIdle` (an idle pause): checked again under the sandbox's lock.
    SandboxRecord transition(const std::string& tenant, const std::string& id, SandboxState from,
                             SandboxState to, PauseKind kind = PauseKind::memory,
                             const std::string& reason = "requested",
                             const std::function<bool()>& stillIdle = nullptr);
    // Hibernate: the memory state to a root-owned file, the VM gone; and
    // the restore that resumes it.
    void hibernate(const SandboxRecord& r, const std::string& reason);
    void restoreHibernated(const SandboxRecord& r);
    std::string hibernationPath(const std::string& id) const {
        return config_.dataDir + "/hibernated/" + id + ".state";
    }
    // The guest mounts its volumes (after a boot or a restore of a VM that
    // had them unmounted); and unmounts them (a snapshot, a delete).
    void mountVolumes(const SandboxRecord& r, AgentConnection& agent);
    bool unmountVolumes(const SandboxRecord& r, AgentConnection& agent);

    LatencyHistogram createLatency_;

    // Spare VMs (SandboxSpares.cpp).
    static std::string shapeOf(const std::string& templateName, const std::string& digest,
                               unsigned vcpus, unsigned memoryMib);
    // The shape a clone of this snapshot takes a spare of. A disk-backed
    // snapshot is a shape of its own: QEMU opens the disk (an overlay on
    // that snapshot's frozen layer) when it starts.
    static std::string spareShapeOf(const SnapshotRecord& snapshot);
    struct SpareShape {
        std::string templateName, digest;
        unsigned vcpus = 0, memoryMib = 0;
        std::string diskSnapshot;  // a disk-backed snapshot's shape: its spare's disk reads it
    };
    std::map<std::string, SpareShape> spareShapes();  // by shapeOf(): the shapes worth a spare now
    // Starts a spare VM (paused, waiting for state); not yet offered.
    std::optional<std::string> bootSpare(const std::string& shape);
    // Loads a snapshot's state into a spare; a spare whose load failed is destroyed.
    void loadSpare(const std::string& id, const std::string& snapshot);
    class SpareVms;  // the pool's view of the controller (SandboxSpares.cpp)
    void startSpares();

    SandboxRecord requireOwned(const std::string& tenant, const std::string& id) override;
    protocol::FsResult fileOp(const std::string& tenant, const std::string& id,
                              const protocol::FsRequest& request) override {
        return files_.fileOp(tenant, id, request);
    }
    void drainFileActivity(const SandboxRecord& r) override { files_.drainFileActivity(r); }
    bool watchFiles(const std::string& tenant, const std::string& id,
                    const std::string& path) override {
        return files_.watchFiles(tenant, id, path);
    }
    std::vector<ExposedPort> exposedPorts(const std::string& tenant,
                                          const std::string& id) override {
        return guestPorts_.list(tenant, id);
    }
    PreparedCommand prepareCommand(const SandboxRecord& r, const ExecOptions& options,
                                   const char* door) override {
        return commands_.prepare(r, options, door);
    }
    std::optional<SandboxRecord> find(const std::string& sandboxId) override {
        return store_.find(sandboxId);
    }
    void record(const std::string& sandboxId, const std::string& tenant, const std::string& type,
                const nlohmann::json& data, const SecretMasker* masker = nullptr) override;
    std::shared_ptr<AgentConnection> agentFor(const std::string& id) override {
        return agents_.get(id);
    }
    // releaseUsage false: the sandbox lives on on another host, and its
    // count in the fleet's usage with it.
    void teardown(const std::string& id, const std::string& why = "it was removed",
                  bool releaseUsage = true);
    // SandboxMoves.
    class LeavingSandbox;
    std::vector<SandboxRecord> movable() override;
    std::unique_ptr<OutgoingMove> moveOut(const std::string& id, const SecretCipher& journey,
                                          const std::string& workDir) override;
    std::string arrivalsDir() const override;
    bool leaving(const std::string& id) override;
    std::mutex leavingMutex_;
    std::set<std::string> leaving_;
    SandboxRecord moveIn(const MovedSandbox& moved, const SecretCipher& journey,
                         const std::string& statePath, const std::string& diskPath,
                         const std::string& workspacePath, const std::string& from) override;
    void dropLocalCopy(const std::string& id, const std::string& why) override;
    // The uid:gid a sandbox's QEMU and its files belong to; none when not root.
    std::optional<std::pair<unsigned, unsigned>> qemuOwner(const SandboxRecord& r) const;
    void prepareSandboxDir(const SandboxRecord& r);
    // Where overlays are made before they move into a QEMU-writable dir.
    std::string stagingDir() const { return config_.dataDir + "/staging"; }
    std::string consoleTail(const std::string& id);
    std::string agentEndpoint(const std::string& id);

    ControllerConfig config_;
    SandboxSecrets secrets_;
    Hypervisor& hypervisor_;
    SandboxStore& store_;
    PortStore& ports_;
    SnapshotStore& snapshots_;
    GatedExecStore& gated_;
    AuditStore& audit_;
    WorkspaceStore* workspaces_;
    // The workspace's write scope, the evidence service's delete hooks.
    SandboxHooks hooks_;
    void checkWrite(const SandboxRecord& r, const std::string& path) override {
        hooks_.checkWrite(r, path);
    }
    CommandJudge judge_;
    AuditRecorder auditLog_;
    std::shared_ptr<SpareVms> spareVms_;  // shared: its type is complete in SandboxSpares.cpp only
    std::unique_ptr<SparePool> spares_;
    KeyedMutexes lifecycleMutexes_;  // a pause, resume, snapshot or delete at a time
    const TemplateCatalog& templates_;
    // The ways out (egress, package proxy): allowlists and the guest's env.
    SandboxNetwork network_{config_.egress, config_.packages};
    // Agent sessions: opened, watched, with the proxies' listeners on them.
    SandboxAgents agents_;
    UidPool uids_;
    SnapshotLibrary snapshotLibrary_{config_.dataDir, snapshots_, store_, workspaces_};
    TenantLimits tenantLimits_{config_.tenants, config_.operatorRules, store_, snapshots_};
    std::unique_ptr<SandboxVolumes> volumes_;
    // Its waits are timers (the queue is only stored here, and stops first).
    ApprovalGates gates_{gated_, auditLog_, secrets_, timers_, config_.approvalTimeoutS};
    SandboxCommands commands_{SandboxCommands::Parts{
        *this, judge_, gates_, secrets_, tenantLimits_, timers_,
        [this](const SandboxRecord& r) { return network_.commandEnv(r); },
        config_.execOutputCap}};
    ApprovalRouter approvals_{gates_, commands_};
    GuestFiles files_{*this};
    GuestProcesses processes_{*this};
    GuestPorts guestPorts_{*this, ports_};
    // Its sampling thread reaches the controller: stopped before the rest goes.
    SandboxMetrics metrics_{*this};
    // Exec deadlines and the gates' waits (no thread waits for a command).
    // Declared last, so it stops before anything its callbacks reach: a
    // deadline ends an exec, whose completion untracks its command and
    // audits it.
    TimerQueue timers_;
};

}  // namespace airlock

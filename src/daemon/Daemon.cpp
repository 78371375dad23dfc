#include "daemon/Daemon.hpp"

#include <sys/resource.h>
#include <sys/stat.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/thread_pool.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "agentclient/AgentConnection.hpp"
#include "agentclient/AgentTransport.hpp"
#include "api/Authenticator.hpp"
#include "api/EventFeed.hpp"
#include "api/E2bApi.hpp"
#include "api/McpServer.hpp"
#include "api/E2bEnvd.hpp"
#include "api/HttpServer.hpp"
#include "api/MetricsServer.hpp"
#include "api/RequestParsing.hpp"
#include "api/IncomingMoves.hpp"
#include "api/Router.hpp"
#include "api/SandboxMover.hpp"
#include "api/TlsContext.hpp"
#include "controller/SandboxController.hpp"
#include "controller/TemplateCatalog.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Log.hpp"
#include "core/SecretCipher.hpp"
#include "daemon/HostMemorySharing.hpp"
#include "daemon/Housekeeping.hpp"
#include "egress/EgressProxy.hpp"
#include "evidence/EvidenceService.hpp"
#include "fleet/ClientTls.hpp"
#include "fleet/EtcdClient.hpp"
#include "fleet/Fleet.hpp"
#include "fleet/FleetApiKeys.hpp"
#include "fleet/FleetCredentials.hpp"
#include "fleet/FleetTenantSecrets.hpp"
#include "fleet/FleetTenants.hpp"
#include "fleet/HostCapacity.hpp"
#include "fleet/NodeMembership.hpp"
#include "hypervisor/AccelProbe.hpp"
#include "hypervisor/LibvirtHypervisor.hpp"
#include "packages/PackageProxy.hpp"
#include "protocol/JsonText.hpp"
#include "store/ApiKeyStore.hpp"
#include "store/AuditStore.hpp"
#include "store/CredentialStore.hpp"
#include "store/TenantSecretStore.hpp"
#include "store/Database.hpp"
#include "store/EvidenceStore.hpp"
#include "store/GatedExecStore.hpp"
#include "store/PortStore.hpp"
#include "store/SandboxStore.hpp"
#include "store/SnapshotStore.hpp"
#include "store/TemplateStore.hpp"
#include "templates/TemplateBuilder.hpp"
#include "api/E2bTemplates.hpp"
#include "store/TenantStore.hpp"
#include "store/VolumeStore.hpp"
#include "store/WorkspaceStore.hpp"
#include "workspace/WorkspaceService.hpp"

namespace airlock {

namespace fs = std::filesystem;

namespace {

// The build's templates beside the binary's folder (build/bin/airlockd ->
// build/templates): no checkout path is compiled in, so a compiler cache
// serves this file to every clone.
std::string besideTheBinaries(const char* name) {
    std::error_code ec;
    auto exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return std::string("build/") + name;
    return (exe.parent_path().parent_path() / name).string();
}
void writeAdminKey(const std::string& path, const std::string& key) {
    // Created 0600 from the start: the key never exists world-readable.
    mode_t old = ::umask(077);
    {
        std::ofstream out(path, std::ios::trunc);
        out << key << "\n";
    }
    ::umask(old);
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
}

// The node-to-node credential: a shared secret in a file only its owner reads.
std::string readClusterToken(const std::string& path) {
    std::ifstream in(path);
    std::string token;
    if (!in || !std::getline(in, token))
        throw Error(ErrorCode::bad_request, "--cluster-token-file: cannot read " + path);
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
    if (token.size() < 32)
        throw Error(ErrorCode::bad_request,
                    "--cluster-token-file: the token must be at least 32 characters");
    struct stat st{};
    if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 0077))
        logWarn("airlockd", "--cluster-token-file " + path +
                                " is readable by others: chmod 600 it");
    return token;
}

// What this node has room for, as the fleet sees it: the host's CPUs and
// available memory, less what its sandboxes were given.
fleet::NodeCapacity nodeCapacity(FrontDoorServices& services, Accel accel) {
    auto host = fleet::HostCapacity::read();
    fleet::NodeCapacity c;
    c.vcpus = host.cpus;
    c.memoryMib = host.memoryMib;
    c.freeMemoryMib = host.availableMib;
    c.accel = accelName(accel);
    unsigned usedVcpus = 0;
    for (const auto& r : services.sandboxes.list(TenantScope::all())) {
        ++c.sandboxes;
        if (r.state == SandboxState::running) usedVcpus += r.vcpus;
    }
    c.freeVcpus = usedVcpus < c.vcpus ? c.vcpus - usedVcpus : 0;
    for (const auto& snap : services.snapshots.list(TenantScope::all()))
        if (snap.state == SnapshotState::ready) c.snapshots.push_back(snap.id);
    for (const auto& t : services.host.templates().list()) {
        c.templates.push_back(t.name);
        if (services.host.hasWarmSnapshot(t.name)) c.warmTemplates.push_back(t.name);
    }
    return c;
}

LogLevel parseLevel(const std::string& s) {
    if (s == "debug") return LogLevel::debug;
    if (s == "warn") return LogLevel::warn;
    if (s == "error") return LogLevel::error;
    return LogLevel::info;
}
}  // namespace

int runDaemon(const DaemonOptions& options) {
    setLogLevel(parseLevel(options.logLevel));
    // Every connection, agent channel and stream is a descriptor: take the
    // hard limit, so the connection cap, not EMFILE, is what refuses clients.
    if (rlimit nofile{};
        ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &nofile);
    }
    // A bad certificate or key stops the start before anything else happens.
    std::shared_ptr<boost::asio::ssl::context> tls;
    if (!options.tlsCertFile.empty())
        tls = api::makeServerTlsContext(options.tlsCertFile, options.tlsKeyFile);
    std::string dataDir = fs::absolute(options.dataDir).lexically_normal().string();
    if (!dataDir.empty() && dataDir.back() == '/') dataDir.pop_back();
    fs::create_directories(dataDir);
    // QEMU runs as an unprivileged user and must traverse to its sandbox dir.
    fs::permissions(dataDir, fs::perms(0711));

    Database db(dataDir + "/state.db");
    ::chmod((dataDir + "/state.db").c_str(), 0600);
    SandboxStore sandboxes(db);
    // A fleet's shared state lives in etcd (docs/deploy.md); a host on its
    // own keeps all of it in SQLite.
    std::unique_ptr<fleet::EtcdClient> etcd;
    if (!options.clusterEtcd.empty())
        etcd = std::make_unique<fleet::EtcdClient>(
            options.clusterEtcd,
            fleet::EtcdTls{options.clusterEtcdCa, options.clusterEtcdCert, options.clusterEtcdKey});
    // The node-to-node credential: a bad file stops the start here.
    std::string clusterToken = etcd ? readClusterToken(options.clusterTokenFile) : std::string();
    ApiKeyStore hostKeys(db);
    std::unique_ptr<fleet::FleetApiKeys> fleetKeys;
    if (etcd) fleetKeys = std::make_unique<fleet::FleetApiKeys>(*etcd);
    ApiKeys& keys = fleetKeys ? static_cast<ApiKeys&>(*fleetKeys) : hostKeys;
    TenantStore hostTenants(db);
    std::unique_ptr<fleet::FleetTenants> fleetTenants;
    std::unique_ptr<fleet::FleetUsage> fleetUsage;
    if (etcd) {
        fleetTenants = std::make_unique<fleet::FleetTenants>(*etcd);
        fleetUsage = std::make_unique<fleet::FleetUsage>(*etcd);
    }
    Tenants& tenants = fleetTenants ? static_cast<Tenants&>(*fleetTenants) : hostTenants;
    PortStore ports(db);
    SnapshotStore snapshots(db);
    GatedExecStore gatedExecs(db);
    AuditStore audit(db);
    api::EventFeed eventFeed;  // GET /v1/events streams wake as the log grows
    audit.onAppend([&eventFeed] { eventFeed.notify(); });
    CredentialStore hostCredentials(db);
    std::unique_ptr<fleet::FleetCredentials> fleetCredentials;
    if (etcd) fleetCredentials = std::make_unique<fleet::FleetCredentials>(*etcd);
    Credentials& credentials =
        fleetCredentials ? static_cast<Credentials&>(*fleetCredentials) : hostCredentials;
    WorkspaceStore workspaceRecords(db);
    VolumeStore volumeRecords(db);
    EvidenceStore evidenceRecords(db);
    if (auto first = keys.createFirstAdmin()) {
        writeAdminKey(dataDir + "/admin.key", first->key);
        logInfo("airlockd", "created an admin API key in " + dataDir + "/admin.key" +
                                (etcd ? " (the fleet's first)" : ""));
    }

    std::string templatesDir =
        options.templatesDir.empty() ? besideTheBinaries("templates") : options.templatesDir;
    TemplateCatalog templates(templatesDir);
    if (templates.list().empty()) logWarn("airlockd", "no templates found in " + templatesDir);

    Accel accel = resolveAccel(options.accel);
    logInfo("airlockd", "accelerator: " + accelName(accel) + " (requested " + options.accel + ")");
    // Before libvirt: QEMU inherits the process flags when the embedded
    // driver forks it; destroyed after the hypervisor, so KSM stays on
    // while guests run.
    HostMemorySharing memorySharing(
        options.ksm == "off" ? HostMemorySharing::Mode::off : HostMemorySharing::Mode::automatic,
        dataDir + "/ksm-host-settings");
    logInfo("airlockd", "kernel samepage merging: " + memorySharing.ksmState());
    LibvirtHypervisor hypervisor(LibvirtOptions{options.libvirtUri, dataDir, accel});

    ControllerConfig config;
    config.dataDir = dataDir;
    config.execOutputCap = options.execOutputCap;
    config.defaultTimeoutS = options.defaultTimeoutS;
    config.sparesPerShape = options.spareVms;
    config.transport = resolveAgentTransport(options.agentTransport, hostHasVhostVsock());
    logInfo("airlockd",
            std::string("agent transport: ") +
                (config.transport == AgentTransportKind::vsock ? "vsock" : "virtio-serial") +
                " (requested " + options.agentTransport + ")");
    if (!options.policyFile.empty()) {
        std::ifstream in(options.policyFile);
        if (!in) throw Error(ErrorCode::bad_request, "--policy: cannot read " + options.policyFile);
        auto j = nlohmann::json::parse(in, nullptr, false);
        if (j.is_discarded())
            throw Error(ErrorCode::bad_request, "--policy: " + options.policyFile + " is not JSON");
        config.operatorRules = api::parsePolicyRules(j);
        logInfo("airlockd", "operator policy from " + options.policyFile + ": " +
                                std::to_string(config.operatorRules.deny.size()) + " deny, " +
                                std::to_string(config.operatorRules.approve.size()) + " approve, " +
                                std::to_string(config.operatorRules.allow.size()) + " allow rules");
    }
    config.approvalTimeoutS = options.approvalTimeoutS;
    config.qemuUidBase = options.qemuUidBase;
    config.qemuUidCount = options.qemuUidCount;
    config.memoryOverheadMib = options.sandboxMemoryOverheadMib;
    config.diskBytesPerSecond = options.diskBytesPerSecond;
    config.diskOpsPerSecond = options.diskOpsPerSecond;
    config.minFreeDiskMib = options.minFreeDiskMib;
    config.maxDiskGib = options.maxDiskGib;
    config.tcgCacheMib = options.tcgCacheMib;
    config.freePageReporting = options.freePageReporting;
    config.memorySharing = memorySharing.ksmState();
    config.tenants = &tenants;
    config.sharedUsage = fleetUsage.get();
    // Secrets at rest: AES-256-GCM with AIRLOCK_SECRET_KEY or DATA_DIR/secret.key (0600).
    config.secretCipher = std::make_shared<const SecretCipher>(
        SecretCipher::fromEnvironmentOrFile(dataDir + "/secret.key"));
    // What a tenant keeps for all its sandboxes (brokered credentials, its
    // secrets) is sealed in a fleet with the fleet's key: any node opens it.
    auto tenantCipher =
        etcd ? std::make_shared<const SecretCipher>(fleet::NodeCredential(clusterToken).credentialsKey())
             : config.secretCipher;
    TenantSecretStore hostTenantSecrets(db);
    std::unique_ptr<fleet::FleetTenantSecrets> fleetTenantSecrets;
    if (etcd) fleetTenantSecrets = std::make_unique<fleet::FleetTenantSecrets>(*etcd);
    TenantSecrets tenantSecrets(
        fleetTenantSecrets ? static_cast<TenantSecretRecords&>(*fleetTenantSecrets)
                           : hostTenantSecrets,
        tenantCipher,
        [&audit](const std::string& tenant, const std::string& type, const nlohmann::json& data) {
            audit.append(AuditEvent{0, "", tenant, nowTimestamp(), type, jsonText(data)});
        });
    config.tenantSecrets = &tenantSecrets;
    // The I/O context and workers serve the API and the egress proxy alike.
    boost::asio::io_context ioc;
    boost::asio::thread_pool workers(16);
    egress::EgressSettings egressSettings;
    for (const auto& cidr : options.egressAllowCidrs)
        egressSettings.allowCidrs.push_back(egress::CidrRange::parse(cidr));
    egressSettings.maxConnections = options.egressMaxConnections;
    egressSettings.bytesPerSecond = options.egressBytesPerSecond;
    egressSettings.upstreamCaFile = options.egressCaFile;
    auto packageUpstreams = packages::PackageUpstreams::parse(options.packageUpstreams);
    egressSettings.reservedHosts = packageUpstreams.hosts();
    for (const auto& r : egressSettings.allowCidrs)
        logWarn("airlockd", "egress may reach " + r.text() + " (--egress-allow-cidr)");
    // Egress has its own workers (blocking writes towards slow guests, name
    // lookups): a guest that stops reading cannot starve the API's.
    boost::asio::thread_pool egressWorkers(8);
    // The proxy starts before the controller that counts its decisions.
    std::atomic<SandboxController*> controllerForCounts{nullptr};
    auto egressProxy = std::make_shared<egress::EgressProxy>(
        ioc, egressWorkers, egressSettings,
        [&audit, &controllerForCounts](const std::string& sandboxId, const std::string& tenant,
                                       const std::string& type, const nlohmann::json& data) {
            audit.append(AuditEvent{0, sandboxId, tenant, nowTimestamp(), type, jsonText(data)});
            if (auto* c = controllerForCounts.load()) c->countAudit(type);
        });
    config.egress = egressProxy;
    std::shared_ptr<packages::PackageProxy> packageProxy;
    if (!options.packageUpstreams.empty()) {
        packages::PackageServiceConfig pc;
        pc.upstreams = packageUpstreams;
        pc.upstreamAuthorization = packageUpstreams.authorization(options.packageUpstreamAuth);
        pc.cacheDir = dataDir + "/packages";
        pc.cacheBytes = std::uint64_t(options.packageCacheGib) << 30;
        pc.allowCidrs = egressSettings.allowCidrs;
        auto service = std::make_shared<packages::PackageService>(
            pc,
            [&audit, &controllerForCounts](const std::string& sandboxId, const std::string& tenant,
                                           const std::string& type, const nlohmann::json& data) {
                audit.append(
                    AuditEvent{0, sandboxId, tenant, nowTimestamp(), type, jsonText(data)});
                if (auto* c = controllerForCounts.load()) c->countAudit(type);
            },
            [&controllerForCounts](const packages::PackageApprovalRequest& q) {
                auto* c = controllerForCounts.load();
                if (!c)
                    return packages::PackageApprovalState{
                        packages::PackageApprovalState::State::denied, ""};
                return c->gates().packageApproval(q);
            },
            [&controllerForCounts](const std::string& sandboxId) {
                auto* c = controllerForCounts.load();
                return c ? c->commands().soleRunning(sandboxId) : std::string();
            });
        packageProxy = std::make_shared<packages::PackageProxy>(ioc, service,
                                                                packages::PackageProxySettings{});
        config.packages = packageProxy;
        for (const auto& spec : options.packageUpstreams)
            logInfo("airlockd", "package upstream " + spec);
    }
    SandboxController controller(
        config, hypervisor,
        ControllerStores{sandboxes, ports, snapshots, gatedExecs, audit, &workspaceRecords,
                         &volumeRecords},
        templates, [](const std::string& endpoint, std::chrono::milliseconds timeout) {
            return connectAgent(endpoint, timeout);
        });
    controllerForCounts = &controller;
    controller.recover();

    for (const auto& name : options.warmTemplates)
        if (!templates.find(name))
            throw Error(ErrorCode::bad_request,
                        "--warm-templates: no template named '" + name + "'");

    // Warm templates are prepared first (creates boot cold until their
    // snapshot is ready); then timeouts are enforced about once a second and
    // the audit log pruned every ten minutes.
    Housekeeping housekeeping("airlockd");
    for (const auto& name : options.warmTemplates)
        housekeeping.once("cannot warm template " + name,
                          [&controller, name] { controller.warmTemplate(name); });
    housekeeping.every(std::chrono::seconds(1), "timeout sweep",
                       [&controller] { controller.enforceTimeouts(); });
    if (options.auditRetentionDays > 0)
        housekeeping.every(std::chrono::minutes(10), "audit retention", [&audit, &options] {
            auto cutoff = formatUnixSeconds(nowUnixSeconds() -
                                            std::int64_t(options.auditRetentionDays) * 86400);
            if (auto n = audit.prune(cutoff))
                logInfo("airlockd", "audit retention: pruned " + std::to_string(n) +
                                        " events of deleted sandboxes");
        });
    housekeeping.start();

    workspace::WorkspaceConfig workspaceConfig;
    workspaceConfig.dataDir = dataDir;
    workspaceConfig.addressPolicy = egress::AddressPolicy(egressSettings.allowCidrs);
    workspaceConfig.cipher = tenantCipher;
    workspaceConfig.pushBranchPrefix = options.pushBranchPrefix;
    workspaceConfig.maxFetchBytes = options.gitFetchMaxMib << 20;
    workspaceConfig.tenantQuotaBytes = options.gitTenantQuotaMib << 20;
    workspaceConfig.mirrorRetention = std::chrono::hours(options.gitMirrorRetentionHours);
    workspaceConfig.minFreeDiskBytes = options.minFreeDiskMib << 20;
    workspace::WorkspaceService workspaces(workspaceConfig, controller.workspaceSandboxes(), credentials,
                                           workspaceRecords);

    EvidenceConfig evidenceConfig;
    evidenceConfig.dataDir = dataDir + "/evidence";
    evidenceConfig.retentionDays = options.evidenceRetentionDays;
    if (options.rotateEvidenceKey) {
        auto rotated = EvidenceKey::rotate(evidenceConfig.dataDir + "/keys");
        logInfo("airlockd",
                "evidence key rotated: the active key is now " + rotated.keyid().substr(0, 16));
    }
    EvidenceService evidence(evidenceConfig, controller.evidenceSource(), &workspaces, evidenceRecords);
    workspaces.setEvidenceSummary([&evidence](const std::string& id, const std::string& tree) {
        return evidence.latestForTree(id, tree);
    });
    controller.setDeleteHooks([&evidence](const SandboxRecord& r) { evidence.beforeDelete(r); },
                              [&evidence](const std::string& id) { evidence.afterDelete(id); });

    // Templates tenants build: each build in a sandbox of its own.
    TemplateStore templateRecords(db);
    templates::TemplateBuilderConfig builderConfig;
    builderConfig.dataDir = dataDir + "/template-builds";
    builderConfig.layerCacheBytes = options.templateCacheGib << 30;
    auto services = controller.frontDoorServices();
    templates::TemplateBuilder builder(
        templates::TemplateBuilder::Parts{controller.sandboxes(), services.snapshotting, snapshots, controller.access(), controller.commands(),
                                          controller.files(), controller.processes(), evidence,
                                          templateRecords, templates, &api::applyBuildSandboxSettings},
        builderConfig);
    builder.recover();
    controller.setUserTemplates([&builder](const std::string& tenant, const std::string& ref)
                                    -> std::optional<SandboxController::UserTemplate> {
        auto t = builder.lookup(tenant, ref);
        if (!t) return std::nullopt;
        SandboxController::UserTemplate out{t->snapshotId, {}};
        for (const auto& [k, v] : t->env.items())
            if (v.is_string()) out.env[k] = v.get<std::string>();
        return out;
    });

    api::Authenticator auth(keys);
    const std::string version = "0.1.0";
    api::Router router(controller.frontDoorServices(), auth, keys, version, options.maxTenantRequests);
    router.setWorkspaces(&workspaces);
    router.setEvidence(&evidence);
    router.setTenantSecrets(&tenantSecrets);
    router.setTemplates(&builder, builderConfig.dataDir);
    // A fleet: this node joins under a lease of its own (docs/deploy.md).
    auto capacity = [services = controller.frontDoorServices(), accel]() mutable {
        return nodeCapacity(services, accel);
    };
    std::unique_ptr<fleet::NodeMembership> membership;
    std::unique_ptr<fleet::Fleet> fleet;
    if (etcd) {
        // A bad --cluster-ca fails before this node joins.
        auto peerTls = fleet::makeClientTls(options.clusterCa, "", "", "--cluster-ca");
        fleet::NodeCredential credential(clusterToken);
        fleet::NodeRecord self;
        self.name = options.nodeName;
        self.url = options.advertiseUrl;
        self.version = version;
        self.started = nowTimestamp();
        membership = std::make_unique<fleet::NodeMembership>(*etcd, self,
                                                             dataDir + "/fleet-lease", capacity);
        membership->join();
        fleet = std::make_unique<fleet::Fleet>(*etcd, *membership, std::move(credential),
                                               std::move(peerTls), options.clusterPlainHttp);
        // Where each sandbox of this node lives, for every other node.
        controller.setPlacementHooks(
            [&fleet = *fleet](const SandboxRecord& r) {
                fleet.directory().record(
                    fleet::SandboxPlacement{r.id, r.tenant, fleet.self(), fleet.membership().epoch(), "created here"});
                fleet.membership().refresh();
            },
            [&fleet = *fleet](const std::string& id) {
                fleet.directory().forget(id);
                try {
                    fleet.approvals().forgetSandbox(id);
                } catch (const std::exception& e) {
                    logWarn("fleet", "the approvals of " + id + " stay listed in etcd: " + e.what());
                }
                fleet.membership().refresh();
            });
        controller.gates().setOpenedHook([&fleet = *fleet](const GatedExec& g) {
            fleet.approvals().record(g.approvalId, {g.tenant, fleet.self(), g.sandboxId});
        });
        evidence.setDirectoryHooks(
            [&fleet = *fleet](const EvidenceRecord& r) {
                fleet.evidence().record(r.id, {r.tenant, fleet.self(), r.sandboxId});
            },
            [&fleet = *fleet](const std::string& id) { fleet.evidence().forget(id); });
    }
    if (fleet) {
        // A crash mid-move can leave a copy here of a sandbox that started
        // on its new node: the fleet's record says which one is the sandbox.
        for (const auto& r : controller.list(TenantScope::all())) {
            try {
                auto placed = fleet->directory().find(r.id);
                if (placed && placed->node != fleet->self())
                    controller.moves().dropLocalCopy(
                        r.id, "it runs on node " + placed->node + " (it moved before a crash here)");
            } catch (const std::exception& e) {
                logWarn("airlockd", "cannot check where " + r.id + " runs: " + e.what());
            }
        }
    }
    router.setNodes(membership.get(), capacity);
    router.setFleet(fleet.get());
    // A drain with move: sandboxes leave through the mover, arrive through
    // the arrivals (both go before the fleet does).
    std::unique_ptr<api::IncomingMoves> arrivals;
    std::unique_ptr<api::SandboxMover> mover;
    if (fleet) {
        arrivals = std::make_unique<api::IncomingMoves>(controller.moves());
        mover = std::make_unique<api::SandboxMover>(controller.moves(), *fleet);
        router.setMoves(arrivals.get(), mover.get());
    }
    // The E2B front door: its per-sandbox tokens are MACs under a key of its own.
    auto e2bKey = readOrCreateKeyFile(dataDir + "/e2b-token.key");
    e2b::SandboxTokens e2bTokens(std::string(e2bKey.begin(), e2bKey.end()));
    api::E2bApi e2bApi(controller.frontDoorServices(), e2bTokens, options.publicDomain);
    api::E2bEnvd e2bEnvd(api::EnvdSandboxes{controller.sandboxes(), controller.files(),
                                            controller.ports(), controller.commands()},
                         e2bTokens, auth, router.limiter(), workers,
                         options.publicDomain);
    api::E2bTemplates e2bTemplates(builder, templates, builderConfig.dataDir + "/e2b-files", tls != nullptr);
    e2bApi.setTemplates(&e2bTemplates);
    router.setE2b(e2bApi, e2bEnvd, e2bTokens);
    // The MCP door: each tool is a REST call to this very listener, made as
    // the caller (their key), so it is what the route does.
    std::atomic<unsigned> selfPort{0};
    std::shared_ptr<boost::asio::ssl::context> selfTls;
    if (tls) {
        selfTls = std::make_shared<boost::asio::ssl::context>(boost::asio::ssl::context::tls_client);
        selfTls->set_verify_mode(boost::asio::ssl::verify_none);  // our own socket, on loopback
    }
    std::string selfHost = options.listenHost == "0.0.0.0" || options.listenHost.empty() ? "127.0.0.1"
                           : options.listenHost == "::" ? "::1"
                                                       : options.listenHost;
    api::McpTools mcpTools(
        controller.frontDoorServices(),
        [&selfPort, selfTls, selfHost](const std::string& method, const std::string& target,
                                       const std::map<std::string, std::string>& headers,
                                       const std::string& body,
                                       std::chrono::steady_clock::time_point deadline) {
            fleet::HttpPeer peer{selfHost, std::to_string(selfPort.load()), selfTls.get()};
            return fleet::httpExchange(peer, method, target, headers, body, deadline, 8u << 20);
        });
    api::McpServer mcpServer(mcpTools, version);
    router.setMcp(mcpServer);
    api::HttpLimits limits;
    limits.maxConnections = options.maxConnections;
    api::HttpServer server(ioc, options.listenHost, options.listenPort, router, controller.sandboxes(), workers,
                           limits, tls);
    router.setPublicDomain(options.publicDomain, server.port());
    router.setEventFeed(&eventFeed);
    std::string consoleDir =
        options.consoleDir.empty() ? besideTheBinaries("console") : options.consoleDir;
    router.setConsole(consoleDir, tls != nullptr);
    if (router.consoleInstalled())
        logInfo("airlockd", std::string("console on ") + (tls ? "https://" : "http://") +
                                options.listenHost + ":" + std::to_string(server.port()) +
                                "/console/");
    else
        logWarn("airlockd", "no console in " + consoleDir + " (scripts/setup builds it)");
    selfPort = server.port();
    logInfo("airlockd", std::string("listening on ") + (tls ? "https://" : "http://") +
                            options.listenHost + ":" + std::to_string(server.port()));
    std::unique_ptr<api::MetricsServer> metricsServer;
    if (!options.metricsListenHost.empty()) {
        metricsServer = std::make_unique<api::MetricsServer>(
            ioc, options.metricsListenHost, options.metricsListenPort, workers,
            [&router] { return router.metricsText(); });
        logInfo("airlockd", "metrics (no key) on http://" + options.metricsListenHost + ":" +
                                std::to_string(metricsServer->port()) + "/metrics");
    }

    boost::asio::signal_set signals(ioc, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code&, int sig) {
        logInfo("airlockd",
                "signal " + std::to_string(sig) + ": stopping (sandboxes keep running)");
        server.stop();
        if (metricsServer) metricsServer->stop();
        ioc.stop();
    });
    // Its own thread: a long template warm-up never delays it.
    Housekeeping evidenceSweeper("airlockd");
    evidenceSweeper.every(std::chrono::minutes(1), "evidence retention",
                          [&evidence] { evidence.collectExpired(); });
    evidenceSweeper.start();
    // Mirrors no workspace uses go after their retention time.
    Housekeeping gitSweeper("airlockd");
    if (options.gitMirrorRetentionHours > 0)
        gitSweeper.every(std::chrono::minutes(10), "git mirror retention",
                         [&workspaces] { workspaces.pruneMirrors(); });
    gitSweeper.start();
    ioc.run();
    if (mover) mover->stop();  // a move in flight ends: its sandbox goes on here
    if (membership) membership->leave();
    housekeeping.stop();
    evidenceSweeper.stop();
    gitSweeper.stop();
    builder.shutdown();  // a build in flight ends with its step; a restart fails it
    controller.shutdown();
    workers.stop();
    workers.join();
    controller.setDeleteHooks(nullptr, nullptr);  // no caller is left; the service goes first
    controller.setPlacementHooks(nullptr, nullptr);
    controller.gates().setOpenedHook(nullptr);
    egressWorkers.stop();
    egressWorkers.join();
    return 0;
}

}  // namespace airlock

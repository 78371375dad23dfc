#include "controller/SandboxController.hpp"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "controller/DiskLayers.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"
#include "core/SafeFs.hpp"
#include "protocol/Messages.hpp"

namespace airlock {
namespace fs = std::filesystem;

SandboxController::SandboxController(ControllerConfig config, Hypervisor& hypervisor,
                                     ControllerStores stores, const TemplateCatalog& templates,
                                     AgentConnector connector)
    : config_(std::move(config)),
      secrets_(config_.secretCipher),
      hypervisor_(hypervisor),
      store_(stores.sandboxes),
      ports_(stores.ports),
      snapshots_(stores.snapshots),
      gated_(stores.gatedExecs),
      audit_(stores.audit),
      workspaces_(stores.workspaces),
      judge_(config_.operatorRules,
             [this](const std::string& t) { return tenantLimits_.bindingOf(t); }),
      auditLog_(stores.audit),
      templates_(templates),
      agents_(SandboxAgents::Parts{std::move(connector),
                                   [this](const std::string& id) { return agentEndpoint(id); },
                                   store_, auditLog_, config_.egress, config_.packages,
                                   std::chrono::milliseconds(15'000),
                                   [this](const SandboxRecord& r) {
                                       return secrets_.injections(r);
                                   }}),
      uids_(config_.qemuUidBase, ::geteuid() == 0 ? config_.qemuUidCount : 0) {
    // The ports the proxies' listeners take in every guest: never reachable
    // from outside.
    guestPorts_.setInternalPorts(network_.internalPorts());
    tenantLimits_.setSharedUsage(config_.sharedUsage);
    fs::create_directories(config_.dataDir + "/sandboxes");
    // Root's alone: overlays are made here, then moved into a sandbox's dir.
    fs::create_directories(stagingDir());
    fs::permissions(stagingDir(), fs::perms(0700));
    for (const auto& r : store_.list(TenantScope::all()))
        if (r.qemuUid > 0) uids_.markUsed(static_cast<std::uint32_t>(r.qemuUid));
    // QEMU (an unprivileged user) must traverse to its sandbox directory;
    // it cannot list or read anything else here.
    fs::permissions(config_.dataDir + "/sandboxes", fs::perms(0711));
    for (const char* d : {"/snapshots", "/warm"}) {
        fs::create_directories(config_.dataDir + d);
        fs::permissions(config_.dataDir + d, fs::perms(0711));
    }
    // Hibernated sandboxes' memory: root's alone (airlockd streams it to QEMU).
    fs::create_directories(config_.dataDir + "/hibernated");
    fs::permissions(config_.dataDir + "/hibernated", fs::perms(0700));
    if (stores.volumes) {
        volumes_ = std::make_unique<SandboxVolumes>(config_.dataDir, *stores.volumes, store_,
                                                    tenantLimits_, uids_, config_.maxVolumeGib,
                                                    config_.qemuUser,
                                                    [this](const std::string& what, std::uint64_t bytes) {
                                                        requireFreeSpace(what, bytes);
                                                    });
        tenantLimits_.setVolumeUsage(
            [this](const std::string& tenant) { return volumes_->usageOf(tenant); });
    }
    startSpares();
}

SandboxController::~SandboxController() {
    metrics_.stop();        // its sampler opens agent sessions
    spares_->stopWorker();  // its worker calls into the controller
    // Agent sessions end before the controller does: their threads call
    // back into it (exec completions, protocol errors).
    agents_.closeAll();
}

std::string SandboxController::sandboxDir(const std::string& id) const {
    return config_.dataDir + "/sandboxes/" + id;
}

std::optional<std::pair<unsigned, unsigned>> SandboxController::qemuOwner(
    const SandboxRecord& r) const {
    if (::geteuid() != 0) return std::nullopt;
    if (r.qemuUid > 0) {
        // Its own group too, unless it needs /dev/kvm (the kvm group's).
        unsigned gid = static_cast<unsigned>(r.qemuUid);
        if (hypervisor_.accel() == Accel::kvm)
            if (group* g = ::getgrnam("kvm")) gid = g->gr_gid;
        return std::make_pair(static_cast<unsigned>(r.qemuUid), gid);
    }
    if (passwd* pw = ::getpwnam(config_.qemuUser.c_str()))
        return std::make_pair(pw->pw_uid, pw->pw_gid);
    return std::nullopt;
}

void SandboxController::prepareSandboxDir(const SandboxRecord& r) {
    // A fresh directory under a root-owned parent: nothing QEMU planted can
    // be in the way.
    std::string dir = sandboxDir(r.id);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        throw Error(ErrorCode::internal, "cannot create " + dir + ": " + std::strerror(errno));
    auto d = safefs::openDir(dir);
    if (auto owner = qemuOwner(r)) {
        if (::fchown(d.get(), owner->first, owner->second) != 0)
            throw Error(ErrorCode::internal, "cannot hand " + dir + " to its QEMU uid");
        // The per-sandbox uid alone may enter; the shared QEMU user's group as before.
        ::fchmod(d.get(), r.qemuUid > 0 ? 0700 : 0750);
    }
}

std::string SandboxController::consoleTail(const std::string& id) {
    // QEMU can write the sandbox dir: never follow what it may have planted.
    return safefs::readTail(sandboxDir(id), "console.log", 2000);
}

CreateSandboxRequest SandboxController::withSettingsOf(const SandboxRecord& source,
                                                      CreateSandboxRequest request) const {
    request.metadata = parseEnvJson(source.metadataJson);  // a stored map of strings, as env
    request.env = parseEnvJson(source.envJson);
    request.policy = CommandJudge::storedRules(source.policyJson);
    request.secrets = secrets_.open(source);
    request.networkAllow = source.network;
    request.packages.reset();  // the source's stored rules are taken whole (newRecord)
    request.onTimeout = timeoutActionFrom(source.onTimeout);
    request.portAccess = portAccessFrom(source.portAccess);
    request.autoResume = source.autoResume;
    request.idle = idleRuleFrom(source.idleJson);
    return request;
}

SandboxRecord SandboxController::newRecord(const std::string& tenant,
                                           const CreateSandboxRequest& asked,
                                           const TemplateInfo& tmpl) {
    // A fork runs under its source's rules, never the fewer a bare request
    // would give it; the floors are checked again as for any create.
    std::optional<SandboxRecord> source;
    if (!asked.settingsFrom.empty()) source = requireOwned(tenant, asked.settingsFrom);
    const CreateSandboxRequest request = source ? withSettingsOf(*source, asked) : asked;
    SandboxRecord r;
    r.id = newId("sbx-");
    r.tenant = tenant;
    r.templateName = tmpl.name;
    r.vcpus = request.vcpus.value_or(tmpl.vcpus);
    r.memoryMib = request.memoryMib.value_or(tmpl.memoryMib);
    if (r.vcpus < 1 || r.vcpus > config_.maxVcpus)
        throw Error(ErrorCode::bad_request,
                    "vcpus must be between 1 and " + std::to_string(config_.maxVcpus));
    if (r.memoryMib < 128 || r.memoryMib > config_.maxMemoryMib)
        throw Error(ErrorCode::bad_request,
                    "memory_mib must be between 128 and " + std::to_string(config_.maxMemoryMib));
    r.timeoutS = request.timeoutS.value_or(config_.defaultTimeoutS);
    if (r.timeoutS < 0 || r.timeoutS > config_.maxTimeoutS)
        throw Error(ErrorCode::bad_request, "timeout_s must be between 0 (none) and " +
                                                std::to_string(config_.maxTimeoutS));
    if (request.onTimeout == TimeoutAction::pause_disk_only && tmpl.diskPath.empty())
        throw Error(ErrorCode::bad_request,
                    "template '" + tmpl.name +
                        "' has no disk: a pause without memory would keep nothing "
                        "(on_timeout pause_disk_only)");
    r.onTimeout = timeoutActionName(request.onTimeout);
    r.expiresAt = r.timeoutS > 0 ? nowUnixSeconds() + r.timeoutS : 0;
    r.createdAt = nowTimestamp();
    r.metadataJson = nlohmann::json(request.metadata).dump();
    r.envJson = nlohmann::json(request.env).dump();
    auto allow = network_.allowlist(request.networkAllow);
    r.network = allow.texts();
    {
        auto t = tenantLimits_.bindingOf(tenant);
        r.packagesJson = network_.packageRules(t ? t->packagesJson : "", request,
                                              source ? &*source : nullptr);
    }
    tenantLimits_.requireWithinFloor(tenant, request.policy, allow.texts());
    r.policyJson = nlohmann::json{{"deny", request.policy.deny},
                                  {"approve", request.policy.approve},
                                  {"allow", request.policy.allow}}
                       .dump();
    // The tenant's secrets as they are now (a fork's copies of them are
    // taken afresh); a create's own secret of a name comes first.
    SecretMap secrets;
    for (const auto& [name, spec] : request.secrets)
        if (!spec.fromTenant) secrets[name] = spec;
    if (config_.tenantSecrets)
        for (auto& [name, spec] : config_.tenantSecrets->secretsOf(tenant)) {
            if (secrets.count(name)) continue;
            // A fork's processes hold its source's placeholder.
            if (auto was = request.secrets.find(name); was != request.secrets.end() &&
                                                      was->second.fromTenant && was->second.inject)
                spec.inject->placeholder = was->second.inject->placeholder;
            secrets[name] = std::move(spec);
        }
    if (!secrets.empty()) {
        r.secretsSealed = secrets_.seal(secrets, r.id);
        r.secretNames.clear();
        for (const auto& [name, spec] : secrets) r.secretNames.push_back(name);
    }
    if (request.task) {
        // Stored masked: a token pasted into a prompt stays out of every
        // listing, audit record and evidence bundle. The creator's text,
        // masked once and never streamed: host-only values too (a whole
        // value matches or nothing does; no prefix is held back).
        r.taskJson = request.task->masked(hostTextMasker(r)).toJson().dump();
    }
    r.artifacts = request.artifacts;
    r.portAccess = portAccessName(request.portAccess);
    r.autoResume = request.autoResume;
    if (!request.idle)  // the tenant's default, when it has one
        if (auto t = tenantLimits_.bindingOf(tenant); t && !t->idleJson.empty())
            r.idleJson = t->idleJson;
    if (request.idle) {
        if (request.idle->afterS < 1 || request.idle->afterS > 7 * 24 * 3600)
            throw Error(ErrorCode::bad_request, "idle after_s must be between 1 and 604800");
        r.idleJson = idleRuleJson(request.idle);
    }
    r.state = SandboxState::creating;
    if (tmpl.diskPath.empty()) {
        if (request.diskGib)
            throw Error(
                ErrorCode::bad_request,
                "template '" + tmpl.name + "' has no disk (its files live in its memory_mib)");
    } else {
        // The overlay's virtual size: the guest's ext4 is grown to it at boot
        // and writes past it get ENOSPC in the guest, never on the host.
        std::uint64_t minGib = (tmpl.diskSizeBytes + kGiB - 1) / kGiB;
        std::uint64_t gib = request.diskGib.value_or(minGib);
        if (gib < minGib || gib > config_.maxDiskGib)
            throw Error(ErrorCode::bad_request,
                        "disk_gib must be between " + std::to_string(minGib) +
                            " (the template's disk) and " + std::to_string(config_.maxDiskGib));
        r.diskBytes = gib * kGiB;
        r.disk = "disk-0.qcow2";
        // The whole disk must fit above the floor: one sandbox filling its
        // disk cannot take the host's last free space.
        requireFreeSpace("create", r.diskBytes);
    }
    // Last: nothing may throw once it holds a uid (teardown returns it).
    if (uids_.enabled()) r.qemuUid = uids_.acquire();
    return r;
}

DomainSpec SandboxController::domainSpec(const SandboxRecord& r, const TemplateInfo& tmpl) {
    std::string dir = sandboxDir(r.id);
    DomainSpec spec;
    spec.name = domainName(r.id);
    spec.uuid = newUuid();
    spec.vcpus = r.vcpus;
    spec.memoryMib = r.memoryMib;
    spec.kernelPath = tmpl.kernelPath;
    spec.initrdPath = tmpl.initrdPath;
    spec.cmdline = tmpl.cmdline;
    spec.consoleLogPath = dir + "/console.log";
    spec.agentSocketPath = dir + "/agent.sock";
    spec.agentPortName = protocol::kAgentPortName;
    spec.vsock = config_.transport == AgentTransportKind::vsock;
    spec.accel = hypervisor_.accel();
    if (!r.disk.empty()) spec.diskPath = dir + "/" + r.disk;
    if (r.qemuUid > 0) spec.runAs = qemuOwner(r);
    if (config_.cpuQuota) spec.cpuQuotaPercent = r.vcpus * 100;
    if (config_.memoryOverheadMib > 0)
        spec.memoryLimitMib = r.memoryMib + config_.memoryOverheadMib;
    spec.diskBytesPerSecond = config_.diskBytesPerSecond;
    spec.diskOpsPerSecond = config_.diskOpsPerSecond;
    spec.tcgCacheMib = tmpl.tcgCacheMib ? tmpl.tcgCacheMib : config_.tcgCacheMib;
    spec.freePageReporting = config_.freePageReporting;
    if (volumes_ && !r.volumesJson.empty())
        spec.volumes = volumes_->domainVolumes(r, r.qemuUid > 0 ? static_cast<unsigned>(r.qemuUid) : 0);
    return spec;
}

void SandboxController::failCreate(const std::string& id, const std::exception& e) {
    logError("controller",
             "create " + id + " failed: " + e.what() + "\nconsole tail:\n" + consoleTail(id));
    try {
        teardown(id);
    } catch (const std::exception& cleanup) {
        logError("controller", "cleanup of " + id + " failed: " + cleanup.what());
        store_.updateState(id, SandboxState::error, e.what());
    }
}

SandboxRecord SandboxController::create(const std::string& tenant,
                                        const CreateSandboxRequest& request) {
    auto r = launch(tenant, request);
    try {
        hooks_.placed(r);
    } catch (const std::exception& e) {
        // Not findable from the other nodes: not a sandbox anyone may use.
        logWarn("controller", "sandbox " + r.id + " is undone: " + e.what());
        try {
            destroy(tenant, r.id, "the fleet could not record it");
        } catch (const std::exception& undo) {
            logError("controller", "undoing " + r.id + ": " + undo.what());
        }
        throw;
    }
    return r;
}

SandboxRecord SandboxController::launch(const std::string& tenant,
                                        const CreateSandboxRequest& request) {
    requireFreeSpace("create");
    if (!request.snapshot.empty()) {
        if (request.boot == BootMode::cold)
            throw Error(ErrorCode::bad_request, "a clone of a snapshot cannot boot cold");
        auto snap =
            isValidId(request.snapshot, "snap-") ? snapshots_.find(request.snapshot) : std::nullopt;
        if (!snap || snap->tenant != tenant || snap->state != SnapshotState::ready ||
            (isBuildKind(snap->kind) && !request.fromBuildSnapshot))
            throw Error(ErrorCode::not_found, "no snapshot " + request.snapshot);
        return createFromSnapshot(tenant, request, *snap);
    }
    auto tmpl = templates_.find(request.templateName);
    if (!tmpl && userTemplates_) {
        // A template the tenant built: a clone of its ready snapshot, with its env.
        if (auto built = userTemplates_(tenant, request.templateName)) {
            auto snap = snapshots_.find(built->snapshotId);
            if (!snap || snap->tenant != tenant || snap->state != SnapshotState::ready)
                throw Error(ErrorCode::not_found,
                            "template '" + request.templateName + "' has no ready snapshot");
            if (request.boot == BootMode::cold)
                throw Error(ErrorCode::bad_request,
                            "a built template starts from its ready snapshot; it cannot boot cold");
            CreateSandboxRequest withEnv = request;
            for (const auto& [k, v] : built->env) withEnv.env.try_emplace(k, v);
            return createFromSnapshot(tenant, withEnv, *snap);
        }
    }
    if (!tmpl)
        throw Error(ErrorCode::not_found, "no template named '" + request.templateName + "'");
    bool withVolumes = request.volumes && !request.volumes->empty();
    if (withVolumes && !volumes_)
        throw Error(ErrorCode::bad_request, "this server keeps no volumes");
    if (withVolumes && request.boot == BootMode::warm)
        throw Error(ErrorCode::bad_request,
                    "a sandbox with volumes boots cold (a warm snapshot has no disks for them)");
    if (request.boot != BootMode::cold && !withVolumes) {
        auto warm = snapshotLibrary_.warmFor(*tmpl, kWarmTenant);
        if (warm && (!request.vcpus || *request.vcpus == warm->vcpus) &&
            (!request.memoryMib || *request.memoryMib == warm->memoryMib) &&
            (!request.diskGib || *request.diskGib * kGiB == tmpl->diskSizeBytes))
            return createFromSnapshot(tenant, request, *warm);
        if (request.boot == BootMode::warm)
            throw Error(ErrorCode::conflict, "template '" + tmpl->name + "' has no warm snapshot" +
                                                 (warm ? " with these resources" : ""));
    }
    SandboxRecord r = newRecord(tenant, request, *tmpl);
    std::string dir = sandboxDir(r.id);
    {
        // Checked and counted in one step: a tenant's parallel creates
        // cannot both take the last unit of its quota.
        auto quota = tenantLimits_.quotaLock(tenant);
        std::lock_guard counted(*quota);
        std::unique_lock<std::mutex> attached;
        try {
            tenantLimits_.requireSandboxQuota(r);
            if (withVolumes) {
                // Checked and recorded in one step: one writer per volume.
                attached = volumes_->attachLock();
                r.volumesJson = volumeMountsJson(volumes_->resolve(tenant, *request.volumes));
            }
        } catch (...) {
            if (r.qemuUid > 0) uids_.release(static_cast<std::uint32_t>(r.qemuUid));
            throw;
        }
        store_.insert(r);  // written first: a crash from here on is undone by recover()
    }
    try {
        prepareSandboxDir(r);
        if (!r.disk.empty())
            createOverlay(stagingDir(), dir, r.disk, tmpl->diskPath, r.diskBytes, qemuOwner(r));
        auto started = steadyMillis();
        hypervisor_.startDomain(domainSpec(r, *tmpl));
        {
            auto agent = agents_.connect(r.id, config_.bootTimeout);
            if (withVolumes) mountVolumes(r, *agent);
            agents_.adopt(r, std::move(agent));
        }
        store_.updateState(r.id, SandboxState::running);
        r.state = SandboxState::running;
        createLatency_.observe(static_cast<double>(steadyMillis() - started) / 1000.0);
        logInfo("controller", "sandbox " + r.id + " running after " +
                                  std::to_string(steadyMillis() - started) + " ms (template " +
                                  tmpl->name + ", cold boot)");
        if (r.disk.empty())
            spares_->want(shapeOf(tmpl->name, tmpl->digest, r.vcpus, r.memoryMib),
                          config_.spareDelayForLive);
        record(r.id, r.tenant, "sandbox.created",
               {{"template", tmpl->name},
                {"digest", tmpl->digest},
                {"boot", "cold"},
                {"policy", nlohmann::json::parse(r.policyJson)},
                {"network", r.network},
                {"volumes", nlohmann::json::parse(r.volumesJson.empty() ? "[]" : r.volumesJson)}});
        return r;
    } catch (const std::exception& e) {
        failCreate(r.id, e);
        throw;
    }
}

std::string SandboxController::agentEndpoint(const std::string& id) {
    if (config_.transport == AgentTransportKind::serial) return sandboxDir(id) + "/agent.sock";
    auto cid = hypervisor_.vsockCid(domainName(id));
    if (!cid) throw Error(ErrorCode::hypervisor_error, "sandbox " + id + " has no vsock CID");
    return vsockEndpoint(*cid);
}

SandboxRecord SandboxController::requireOwned(const std::string& tenant, const std::string& id) {
    auto r = isValidId(id, "sbx-") ? store_.find(id) : std::nullopt;
    // Another tenant's sandbox is indistinguishable from a missing one.
    if (!r || r->tenant != tenant || r->state == SandboxState::deleting)
        throw Error(ErrorCode::not_found, "no sandbox " + id);
    return *r;
}

SandboxRecord SandboxController::get(const std::string& tenant, const std::string& id) {
    return requireOwned(tenant, id);
}

std::vector<SandboxRecord> SandboxController::list(const TenantScope& scope) {
    auto all = store_.list(scope);
    std::erase_if(all, [](const SandboxRecord& r) {
        return r.state == SandboxState::deleting ||
               r.tenant.rfind('_', 0) == 0;  // internal: _spare, _warm
    });
    return all;
}

std::optional<std::string> SandboxController::ownerOf(const std::string& id) {
    std::optional<std::string> owner;
    if (isValidId(id, "sbx-")) {
        if (auto r = store_.find(id)) owner = r->tenant;
    } else if (isValidId(id, "snap-")) {
        if (auto s = snapshots_.find(id)) owner = s->tenant;
    } else if (isValidId(id, "apr-")) {
        if (auto g = gated_.findByApproval(id)) owner = g->tenant;
    }
    if (owner && owner->rfind('_', 0) == 0)
        return std::nullopt;  // internal objects are nobody's to touch
    return owner;
}

void SandboxController::teardown(const std::string& id, const std::string& why,
                                 bool releaseUsage) {
    // Before the VM goes: calls still open learn why, not "guest gone", and
    // none reconnects to it.
    agents_.retire(id, "sandbox " + id + " is gone: " + why);
    hypervisor_.destroyDomain(domainName(id));
    agents_.forget(id);
    safefs::removeTree(sandboxDir(id));
    std::error_code ec;
    fs::remove(hibernationPath(id), ec);
    ports_.removeAll(id);
    auto gone = store_.find(id);
    store_.remove(id);
    if (gone && volumes_ && !gone->volumesJson.empty())
        volumes_->released(volumeMountsFrom(gone->volumesJson));
    if (gone && releaseUsage) tenantLimits_.released(*gone);
    if (gone && gone->qemuUid > 0) uids_.release(static_cast<std::uint32_t>(gone->qemuUid));
    // Its disk chain may have been the last reader of a deleted snapshot's layer.
    snapshotLibrary_.collect();
}

void SandboxController::destroy(const std::string& tenant, const std::string& id,
                                const std::string& why) {
    auto owned = requireOwned(tenant, id);
    hooks_.beforeDelete(owned);  // a failure is logged: the delete goes on
    {
        auto lifecycle = lifecycleMutex(id);
        std::lock_guard op(*lifecycle);  // waits for a pause, resume or snapshot in flight
        auto current = requireOwned(tenant, id);
        if (!current.volumesJson.empty() && current.state == SandboxState::running) {
            // What the guest's page cache holds reaches its volumes first.
            try {
                unmountVolumes(current, *agents_.get(id));
            } catch (const std::exception& e) {
                logWarn("controller", "sandbox " + id + ": volumes not unmounted before the delete (" +
                                          e.what() + ")");
            }
        }
        store_.updateState(id, SandboxState::deleting);
        teardown(id, why);
    }
    if (workspaces_) workspaces_->remove(id);
    record(id, tenant, "sandbox.deleted", nlohmann::json::object());
    hooks_.afterDelete(id);
    gates_.cancelOf(id, "the sandbox was deleted");
    logInfo("controller", "sandbox " + id + " deleted");
    spares_->trim();  // it may have been the last of its shape
    lifecycleMutexes_.forget(id);
}

SandboxRecord SandboxController::requireRunning(const std::string& tenant, const std::string& id) {
    auto r = requireOwned(tenant, id);
    if (r.state == SandboxState::paused && r.autoResume) {
        wake(tenant, id);
        r = requireOwned(tenant, id);
    }
    requireRunningState(r);
    // A call on its way is traffic: no idle pause lands before its stream opens.
    try {
        agents_.get(id)->touch();
    } catch (const std::exception&) {
        // No session now: the call itself says so.
    }
    return r;
}

std::shared_ptr<AgentConnection> SandboxController::runningAgent(const std::string& tenant,
                                                                 const std::string& id) {
    return agentFor(requireRunning(tenant, id).id);
}

SecretMasker SandboxController::guestOutputMasker(const SandboxRecord& r) const {
    return secrets_.guestOutputMasker(r);
}

SecretMasker SandboxController::streamMasker(const SandboxRecord& r,
                                             const std::string& commandText) const {
    return SandboxSecrets::streamMasker(secrets_.open(r), commandText);
}

void SandboxController::record(const std::string& sandboxId, const std::string& tenant,
                               const std::string& type, const nlohmann::json& data,
                               const SecretMasker* masker) {
    // The audit log is written whole and never streamed, so comparing it
    // with host-only values is no oracle: a brokered credential a client
    // typed into a command is masked there too.
    if (masker)
        if (auto r = find(sandboxId)) {
            auto host = hostTextMasker(*r);
            auditLog_.record(sandboxId, tenant, type, maskRecord(data, *masker), &host);
            return;
        }
    auditLog_.record(sandboxId, tenant, type, data, masker);
}

SecretMasker SandboxController::hostTextMasker(const SandboxRecord& r) const {
    return secrets_.hostTextMasker(r);
}

EnforcedLimits SandboxController::enforcedLimits() const {
    return EnforcedLimits{config_.cpuQuota,
                          config_.memoryOverheadMib,
                          config_.diskBytesPerSecond,
                          config_.diskOpsPerSecond,
                          config_.minFreeDiskMib,
                          uids_.enabled(),
                          hypervisor_.accel() == Accel::kvm ? 0u : config_.tcgCacheMib,
                          config_.freePageReporting,
                          config_.memorySharing};
}

void SandboxController::requireFreeSpace(const std::string& what, std::uint64_t needBytes) const {
    if (config_.minFreeDiskMib == 0) return;
    struct statvfs st {};
    if (::statvfs(config_.dataDir.c_str(), &st) != 0) return;
    std::uint64_t freeMib = static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize / (1024 * 1024);
    std::uint64_t needMib = (needBytes + 1024 * 1024 - 1) / (1024 * 1024);
    if (freeMib < config_.minFreeDiskMib + needMib)
        throw Error(
            ErrorCode::insufficient_storage,
            what + " refused: the data directory has " + std::to_string(freeMib) +
                " MiB free, under the " + std::to_string(config_.minFreeDiskMib) + " MiB floor" +
                (needMib ? " plus the " + std::to_string(needMib) + " MiB of its disk" : ""));
}

void SandboxController::recover() {
    std::map<std::string, bool> known;
    for (const auto& r : store_.list(TenantScope::all())) {
        known[domainName(r.id)] = true;
        try {
            if (r.state == SandboxState::creating || r.state == SandboxState::deleting) {
                logWarn("recover",
                        "finishing interrupted " + sandboxStateName(r.state) + " of " + r.id);
                teardown(r.id);
                continue;
            }
            if (r.state == SandboxState::paused && r.hibernated) {
                // Its state was whole before this was written: a VM a crash
                // left behind goes, as the hibernation would have done.
                hypervisor_.destroyDomain(domainName(r.id));
                logInfo("recover", "adopted sandbox " + r.id + ", hibernated");
                continue;
            }
            if (r.state == SandboxState::paused && r.pausedWithoutMemory) {
                // Its disk was synced before the state was written: a VM a
                // crash left behind goes, as the pause would have done.
                hypervisor_.destroyDomain(domainName(r.id));
                logInfo("recover", "adopted sandbox " + r.id + ", paused without its memory");
                continue;
            }
            DomainState ds = hypervisor_.domainState(domainName(r.id));
            bool live = r.state == SandboxState::running || r.state == SandboxState::paused;
            if (live && ds != DomainState::running && ds != DomainState::paused) {
                logWarn("recover",
                        "sandbox " + r.id + " lost its VM while the controller was down");
                hypervisor_.destroyDomain(domainName(r.id));
                store_.updateState(r.id, SandboxState::stopped,
                                   "the VM stopped while the controller was down");
            } else if (r.state == SandboxState::running) {
                // Paused but recorded running: a snapshot was cut short.
                if (ds == DomainState::paused) hypervisor_.resumeDomain(domainName(r.id));
                logInfo("recover", "adopted running sandbox " + r.id);
            } else if (r.state == SandboxState::paused) {
                // The state is written before the VM is touched: finish the pause.
                if (ds == DomainState::running) hypervisor_.suspendDomain(domainName(r.id));
                logInfo("recover", "adopted paused sandbox " + r.id);
            }
        } catch (const std::exception& e) {
            logError("recover", r.id + ": " + e.what());
        }
    }
    for (const auto& name : hypervisor_.listDomains()) {
        if (name.rfind("airlock-", 0) == 0 && !known.count(name)) {
            logWarn("recover", "destroying orphan domain " + name);
            hypervisor_.destroyDomain(name);
        }
    }
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(config_.dataDir + "/sandboxes", ec)) {
        std::string id = entry.path().filename().string();
        if (!known.count(domainName(id)) || !store_.find(id)) {
            logWarn("recover", "removing orphan sandbox dir " + id);
            try {
                safefs::removeTree(entry.path().string());
            } catch (const std::exception& e) {
                logError("recover", e.what());
            }
        }
    }
    snapshotLibrary_.recover();
}

}  // namespace airlock

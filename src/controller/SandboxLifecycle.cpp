// Pause/resume, snapshots and clones, warm templates and timeouts: the parts
// of SandboxController that change what a sandbox's VM is, not what runs in it.
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "controller/DiskLayers.hpp"
#include "controller/SandboxController.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Hex.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"
#include "core/SafeFs.hpp"
#include "core/Sha256.hpp"

namespace airlock {
namespace fs = std::filesystem;

namespace {

constexpr const char* kMemoryFile = "memory.state";
constexpr const char* kLayerFile = "disk.qcow2";
constexpr const char* kManifestFile = "manifest.json";

// "disk-3.qcow2" -> "disk-4.qcow2": each snapshot moves a sandbox onto a new overlay.
std::string nextOverlayName(const std::string& current) {
    unsigned generation = 0;
    if (std::sscanf(current.c_str(), "disk-%u.qcow2", &generation) != 1)
        throw Error(ErrorCode::internal, "unexpected overlay name " + current);
    return "disk-" + std::to_string(generation + 1) + ".qcow2";
}

}  // namespace

std::string SandboxController::snapshotDir(const SnapshotRecord& s) const {
    return config_.dataDir + (s.kind == "warm" ? "/warm/" : "/snapshots/") + s.id;
}

std::string SandboxController::snapshotStatePath(const SnapshotRecord& s) const {
    return snapshotDir(s) + "/" + kMemoryFile;
}

std::string SandboxController::snapshotLayerPath(const SnapshotRecord& s) const {
    return snapshotDir(s) + "/" + kLayerFile;
}

// ---------------------------------------------------------------- pause / resume / timeout

SandboxRecord SandboxController::transition(const std::string& tenant, const std::string& id,
                                            SandboxState from, SandboxState to) {
    const bool pausing = to == SandboxState::paused;
    requireOwned(tenant, id);
    auto lifecycle = lifecycleMutex(id);
    std::lock_guard op(*lifecycle);
    auto r = requireOwned(tenant, id);
    if (r.state == to) return r;  // pausing (resuming) twice is harmless
    if (r.state != from)
        throw Error(ErrorCode::conflict, "sandbox " + id + " is " + sandboxStateName(r.state) +
                                             "; only a " + sandboxStateName(from) +
                                             " sandbox can be " + (pausing ? "paused" : "resumed"));
    store_.updateState(id, to);  // written first; recover() reconciles a crash in between
    try {
        if (pausing)
            hypervisor_.suspendDomain(domainName(id));
        else
            hypervisor_.resumeDomain(domainName(id));
    } catch (...) {
        store_.updateState(id, from);
        throw;
    }
    r.state = to;
    logInfo("controller", "sandbox " + id + (pausing ? " paused" : " resumed"));
    record(id, tenant, pausing ? "sandbox.paused" : "sandbox.resumed", nlohmann::json::object());
    return r;
}

SandboxRecord SandboxController::pause(const std::string& tenant, const std::string& id) {
    return transition(tenant, id, SandboxState::running, SandboxState::paused);
}

SandboxRecord SandboxController::resume(const std::string& tenant, const std::string& id) {
    return transition(tenant, id, SandboxState::paused, SandboxState::running);
}

SandboxRecord SandboxController::setTimeout(const std::string& tenant, const std::string& id,
                                            std::int64_t timeoutS) {
    if (timeoutS < 0 || timeoutS > config_.maxTimeoutS)
        throw Error(ErrorCode::bad_request, "timeout_s must be between 0 (none) and " +
                                                std::to_string(config_.maxTimeoutS));
    requireOwned(tenant, id);
    store_.updateTimeout(id, timeoutS, timeoutS > 0 ? nowUnixSeconds() + timeoutS : 0);
    return requireOwned(tenant, id);
}

void SandboxController::enforceTimeouts() {
    gates_.expire();
    auto now = nowUnixSeconds();
    for (const auto& r : store_.list(TenantScope::all())) {
        if (r.expiresAt == 0 || r.expiresAt > now) continue;
        if (r.state != SandboxState::running && r.state != SandboxState::paused) continue;
        try {
            if (r.onTimeout == "pause") {
                if (r.state == SandboxState::running) pause(r.tenant, r.id);
                store_.updateTimeout(r.id, r.timeoutS, 0);
                logInfo("controller", "sandbox " + r.id + " paused: its timeout passed");
                record(r.id, r.tenant, "sandbox.timeout", {{"action", "pause"}});
            } else {
                record(r.id, r.tenant, "sandbox.timeout", {{"action", "kill"}});
                destroy(r.tenant, r.id);
                logInfo("controller", "sandbox " + r.id + " killed: its timeout passed");
            }
        } catch (const std::exception& e) {
            logError("controller", "timeout of " + r.id + ": " + e.what());
        }
    }
}

// ---------------------------------------------------------------- snapshots

SnapshotRecord SandboxController::snapshot(const std::string& tenant, const std::string& id) {
    requireOwned(tenant, id);
    requireFreeSpace("snapshot");
    requireSnapshotQuota(tenant);  // early, cheap; checked again where it is counted
    auto lifecycle = lifecycleMutex(id);
    std::lock_guard op(*lifecycle);
    auto r = requireOwned(tenant, id);
    if (r.state != SandboxState::running && r.state != SandboxState::paused)
        throw Error(ErrorCode::conflict,
                    "sandbox " + id + " is " + sandboxStateName(r.state) +
                        "; only a running or paused sandbox can be snapshotted");
    auto tmpl = templates_.find(r.templateName);
    if (!tmpl)
        throw Error(ErrorCode::conflict,
                    "template '" + r.templateName + "' of sandbox " + id + " is gone");

    SnapshotRecord s;
    s.id = newId("snap-");
    s.tenant = tenant;
    s.kind = tenant == kWarmTenant ? "warm" : "user";
    s.sourceSandbox = id;
    s.templateName = tmpl->name;
    s.templateDigest = tmpl->digest;
    s.vcpus = r.vcpus;
    s.memoryMib = r.memoryMib;
    s.hasDisk = !r.disk.empty();
    s.layers = r.layers;
    if (s.hasDisk) s.layers.push_back(s.id);
    s.createdAt = nowTimestamp();
    {
        // Checked and counted in one step: two snapshots at once cannot both
        // take the tenant's last one.
        auto quota = quotaLock(tenant);
        std::lock_guard counted(*quota);
        requireSnapshotQuota(tenant);
        snapshots_.insert(s);  // written first: recover() removes a half-taken snapshot
    }
    if (workspaces_) workspaces_->copy(id, s.id);  // its clones get the sandbox's workspace

    std::string dir = snapshotDir(s);
    std::string domain = domainName(id);
    bool wasRunning = r.state == SandboxState::running;
    bool diskSwitched = false;
    std::string nextOverlay;
    auto started = steadyMillis();
    try {
        fs::create_directories(dir);
        // QEMU opens the frozen layer (as a backing file) by path.
        fs::permissions(dir, fs::perms(0711));
        if (wasRunning) hypervisor_.suspendDomain(domain);
        if (s.hasDisk) {
            // The current overlay becomes the frozen layer: linked under the
            // snapshot (its canonical path, named in every later overlay's
            // header), the sandbox goes on writing a new overlay on top.
            // QEMU can write its directory: the overlay is opened without
            // following links, checked to be a regular file, and that very
            // file is linked (and later chmod/chown'ed through its fd).
            std::string layer = dir + "/" + kLayerFile;
            UniqueFd frozen = safefs::linkFile(sandboxDir(id), r.disk, dir, kLayerFile);
            nextOverlay = nextOverlayName(r.disk);
            createOverlay(stagingDir(), sandboxDir(id), nextOverlay, layer,
                          r.diskBytes ? r.diskBytes : tmpl->diskSizeBytes, qemuOwner(r));
            hypervisor_.switchDiskOverlay(domain, sandboxDir(id) + "/" + nextOverlay);
            diskSwitched = true;
            store_.updateDisk(id, nextOverlay, s.layers);
            // Nobody writes it again: read-only and root's (no-op when unprivileged).
            ::fchmod(frozen.get(), 0444);
            if (::geteuid() == 0 && ::fchown(frozen.get(), 0, 0) != 0)
                logWarn("controller", "cannot hand " + layer + " back to root");
        }
        hypervisor_.saveState(domain, dir + "/" + kMemoryFile, sandboxDir(id));
        if (wasRunning) hypervisor_.resumeDomain(domain);
    } catch (const std::exception& e) {
        logError("controller", "snapshot of " + id + " failed: " + e.what());
        if (wasRunning) {
            try {
                hypervisor_.resumeDomain(domain);
            } catch (const std::exception& again) {
                logError("controller",
                         "cannot resume " + id + " after a failed snapshot: " + again.what());
            }
        }
        if (diskSwitched) {
            // The sandbox's disk now reads the frozen layer: keep it until the
            // sandbox is gone, drop everything else.
            snapshots_.updateState(s.id, SnapshotState::deleted);
            std::error_code ec;
            fs::remove(dir + "/" + kMemoryFile, ec);
        } else {
            std::error_code ec;
            if (!nextOverlay.empty()) fs::remove(sandboxDir(id) + "/" + nextOverlay, ec);
            fs::remove_all(dir, ec);
            snapshots_.remove(s.id);
        }
        throw;
    }
    auto pausedMs = steadyMillis() - started;

    // Modes first: a chmod changes a file's ctime, which the hash below vouches for.
    ::chmod((dir + "/" + kMemoryFile).c_str(), 0400);
    // The manifest: enough to check the files and to know what they need.
    nlohmann::json files = nlohmann::json::array();
    std::int64_t total = 0;
    for (const char* name : {kMemoryFile, kLayerFile}) {
        std::string path = dir + "/" + name;
        if (!fs::exists(fs::symlink_status(path))) continue;
        auto before = safefs::identity(path);
        auto d = safefs::digest(path);
        total += static_cast<std::int64_t>(d.size);
        files.push_back({{"name", name}, {"size", d.size}, {"sha256", d.sha256}});
        // Hashed just now: the first clone need not hash it again unless it changes.
        if (safefs::identity(path) == before) verified_.remember(path, before);
    }
    nlohmann::json manifest = {
        {"id", s.id},
        {"source_sandbox", id},
        {"template", {{"name", s.templateName}, {"digest", s.templateDigest}}},
        {"resources", {{"vcpus", s.vcpus}, {"memory_mib", s.memoryMib}}},
        {"layers", s.layers},
        {"files", files},
        {"size_bytes", total},
        {"created_at", s.createdAt}};
    {
        std::ofstream out(dir + "/" + kManifestFile, std::ios::trunc);
        out << manifest.dump(2) << "\n";
    }
    ::chmod((dir + "/" + kManifestFile).c_str(), 0444);

    snapshots_.markReady(s.id, total, manifest.dump());
    record(id, tenant, "snapshot.created",
           {{"snapshot", s.id}, {"size_bytes", total}, {"held_ms", pausedMs}});
    spares_->want(spareShapeOf(s), std::chrono::milliseconds(0), s.id);
    logInfo("controller", "snapshot " + s.id + " of " + id + ": " + std::to_string(total) +
                              " bytes, sandbox held for " + std::to_string(pausedMs) + " ms");
    return *snapshots_.find(s.id);
}

SnapshotRecord SandboxController::getSnapshot(const std::string& tenant, const std::string& id) {
    auto s = isValidId(id, "snap-") ? snapshots_.find(id) : std::nullopt;
    if (!s || s->tenant != tenant || s->state == SnapshotState::deleted)
        throw Error(ErrorCode::not_found, "no snapshot " + id);
    return *s;
}

std::vector<SnapshotRecord> SandboxController::listSnapshots(const TenantScope& scope) {
    auto all = snapshots_.list(scope);
    std::erase_if(all, [](const SnapshotRecord& s) {
        return s.state == SnapshotState::deleted ||
               s.tenant.rfind('_', 0) == 0;  // internal: warm snapshots
    });
    return all;
}

void SandboxController::deleteSnapshot(const std::string& tenant, const std::string& id) {
    auto s = getSnapshot(tenant, id);
    if (s.state == SnapshotState::creating)
        throw Error(ErrorCode::conflict, "snapshot " + id + " is still being taken");
    // Hidden at once; its disk layer stays while a clone (or a later
    // snapshot) still reads it, and goes with the last of them.
    snapshots_.updateState(id, SnapshotState::deleted);
    if (workspaces_) workspaces_->remove(id);
    std::error_code ec;
    fs::remove(snapshotDir(s) + "/" + kMemoryFile, ec);
    fs::remove(snapshotDir(s) + "/" + kManifestFile, ec);
    collectSnapshots();
    spares_->trim();
    logInfo("controller", "snapshot " + id + " deleted");
}

void SandboxController::discardSnapshot(const SnapshotRecord& s) {
    verified_.forgetUnder(snapshotDir(s));
    std::error_code ec;
    fs::remove_all(snapshotDir(s), ec);
    if (ec)
        throw Error(ErrorCode::internal, "cannot remove " + snapshotDir(s) + ": " + ec.message());
    snapshots_.remove(s.id);
}

void SandboxController::collectSnapshots() {
    std::lock_guard lock(gcMutex_);
    std::set<std::string> read;
    for (const auto& r : store_.list(TenantScope::all()))
        for (const auto& l : r.layers) read.insert(l);
    auto all = snapshots_.list(TenantScope::all());
    for (const auto& s : all)
        if (s.state != SnapshotState::deleted)
            for (const auto& l : s.layers) read.insert(l);
    for (const auto& s : all) {
        if (s.state != SnapshotState::deleted || read.count(s.id)) continue;
        try {
            discardSnapshot(s);
            logInfo("controller", "snapshot " + s.id + ": last reader gone, files removed");
        } catch (const std::exception& e) {
            logError("controller", e.what());
        }
    }
}

void SandboxController::recoverSnapshots() {
    std::set<std::string> readBySandboxes;
    for (const auto& r : store_.list(TenantScope::all()))
        for (const auto& l : r.layers) readBySandboxes.insert(l);
    std::set<std::string> known;
    for (const auto& s : snapshots_.list(TenantScope::all())) {
        known.insert(s.id);
        if (s.state != SnapshotState::creating) continue;
        logWarn("recover", "snapshot " + s.id + " was interrupted");
        try {
            if (readBySandboxes.count(s.id)) {
                snapshots_.updateState(s.id, SnapshotState::deleted);
                std::error_code ec;
                fs::remove(snapshotDir(s) + "/" + kMemoryFile, ec);
            } else {
                discardSnapshot(s);
            }
        } catch (const std::exception& e) {
            logError("recover", e.what());
        }
    }
    collectSnapshots();
    for (const char* sub : {"/snapshots", "/warm"}) {
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(config_.dataDir + sub, ec)) {
            if (known.count(entry.path().filename().string()) &&
                snapshots_.find(entry.path().filename().string()))
                continue;
            logWarn("recover", "removing orphan snapshot dir " + entry.path().string());
            fs::remove_all(entry.path(), ec);
        }
    }
}

// ---------------------------------------------------------------- clones

void SandboxController::reseed(AgentConnection& agent) {
    auto nowNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
    agent.call(
        protocol::ReseedRequest{hexEncode(randomBytes(64)), static_cast<std::uint64_t>(nowNs)},
        std::chrono::seconds(15));
}

unsigned SandboxController::cloneDiskGib(const SnapshotRecord& snap, const TemplateInfo& tmpl) {
    // A clone's disk is its snapshot's size (the frozen layer's).
    std::uint64_t layerBytes = tmpl.diskSizeBytes;
    try {
        layerBytes = qcow2VirtualSize(snapshotDir(snap) + "/" + kLayerFile);
    } catch (const std::exception&) {
        // verifySnapshotFiles() says what is wrong with it before any restore
    }
    return static_cast<unsigned>((layerBytes + kGiB - 1) / kGiB);
}

SandboxRecord SandboxController::createFromSnapshot(const std::string& tenant,
                                                    const CreateSandboxRequest& request,
                                                    const SnapshotRecord& snap) {
    auto tmpl = templates_.find(snap.templateName);
    if (!tmpl || tmpl->digest != snap.templateDigest)
        throw Error(ErrorCode::conflict, "snapshot " + snap.id + " was taken from template '" +
                                             snap.templateName + "' " + snap.templateDigest +
                                             ", which this server no longer has");
    if (request.vcpus && *request.vcpus != snap.vcpus)
        throw Error(ErrorCode::bad_request,
                    "a clone keeps its snapshot's vcpus (" + std::to_string(snap.vcpus) + ")");
    if (request.memoryMib && *request.memoryMib != snap.memoryMib)
        throw Error(ErrorCode::bad_request, "a clone keeps its snapshot's memory_mib (" +
                                                std::to_string(snap.memoryMib) + ")");
    CreateSandboxRequest fixed = request;
    fixed.vcpus = snap.vcpus;
    fixed.memoryMib = snap.memoryMib;
    if (snap.hasDisk) {
        auto layerGib = cloneDiskGib(snap, *tmpl);
        if (request.diskGib && *request.diskGib != layerGib)
            throw Error(ErrorCode::bad_request,
                        "a clone keeps its snapshot's disk_gib (" + std::to_string(layerGib) + ")");
        fixed.diskGib = layerGib;
    }
    SandboxRecord r = newRecord(tenant, fixed, *tmpl);
    if (snap.kind == "user") r.snapshotId = snap.id;
    r.disk = snap.hasDisk ? "disk-0.qcow2" : "";
    r.layers = snap.hasDisk ? snap.layers : std::vector<std::string>{};
    std::string shape = spareShapeOf(snap);
    auto quota = quotaLock(tenant);
    std::unique_lock counted(*quota);  // checked and counted in one step
    try {
        requireSandboxQuota(r);
    } catch (...) {
        if (r.qemuUid > 0) uids_.release(static_cast<std::uint32_t>(r.qemuUid));
        throw;
    }
    std::optional<SparePool::Taken> taken = spares_->take(shape, snap.id);
    std::optional<std::string> spare;
    if (taken) spare = taken->id;
    if (spare) {
        // The spare's VM, directory and uid become this sandbox's; what was
        // sealed for the new id is sealed again for the spare's.
        auto spareRecord = store_.find(*spare);
        if (r.qemuUid > 0) uids_.release(static_cast<std::uint32_t>(r.qemuUid));
        r.qemuUid = spareRecord ? spareRecord->qemuUid : 0;
        r.secretsSealed = secrets_.reseal(r.secretsSealed, r.id, *spare);
        r.id = *spare;
        store_.replace(r);  // the spare's row becomes this sandbox, in one write
    } else {
        store_.insert(r);  // written first (with the layers it reads: the GC keeps them)
    }
    counted.unlock();
    std::string dir = sandboxDir(r.id);
    try {
        auto started = steadyMillis();
        verifySnapshotFiles(snap);
        auto verified = steadyMillis();
        if (spare) {
            if (!taken->loaded)
                hypervisor_.loadState(domainName(r.id), snapshotDir(snap) + "/" + kMemoryFile, dir);
        } else {
            prepareSandboxDir(r);
            if (!r.disk.empty())
                createOverlay(stagingDir(), dir, r.disk, snapshotDir(snap) + "/" + kLayerFile,
                              r.diskBytes, qemuOwner(r));
            DomainSpec spec = domainSpec(r, *tmpl);
            spec.incoming = true;
            hypervisor_.restoreDomain(spec, snapshotDir(snap) + "/" + kMemoryFile, dir);
        }
        auto loaded = steadyMillis();
        hypervisor_.resumeDomain(domainName(r.id));
        // A new hello gives the clone its own agent session; then fresh
        // entropy before anyone can run a command in it.
        std::shared_ptr<AgentConnection> agent = connectAgentOf(r.id, std::chrono::seconds(30));
        reseed(*agent);
        adoptAgent(r, std::move(agent));
        store_.updateState(r.id, SandboxState::running);
        r.state = SandboxState::running;
        createLatency_.observe(static_cast<double>(steadyMillis() - started) / 1000.0);
        logInfo("controller", "sandbox " + r.id + " running after " +
                                  std::to_string(steadyMillis() - started) +
                                  " ms (files checked in " + std::to_string(verified - started) +
                                  " ms, restored " + snap.id +
                                  (!spare          ? ""
                                   : taken->loaded ? " from a spare VM holding it"
                                                   : " into a spare VM") +
                                  " in " + std::to_string(loaded - verified) + " ms)");
        spares_->want(shape, std::chrono::milliseconds(0), snap.id);
        if (workspaces_ && snap.kind == "user") workspaces_->copy(snap.id, r.id);
        record(r.id, r.tenant, "sandbox.created",
               {{"template", tmpl->name},
                {"digest", tmpl->digest},
                {"boot", "restore"},
                {"snapshot", snap.id},
                {"policy", nlohmann::json::parse(r.policyJson)},
                {"network", r.network}});
        return r;
    } catch (const std::exception& e) {
        failCreate(r.id, e);
        spares_->want(shape, std::chrono::milliseconds(0), snap.id);
        throw;
    }
}

void SandboxController::verifySnapshotFiles(const SnapshotRecord& snap) {
    // The frozen layers of the chain (each snapshot's own), and this
    // snapshot's memory state, against the manifests in the database.
    std::vector<std::pair<std::string, nlohmann::json>> wanted;  // path -> manifest entry
    auto expect = [&](const SnapshotRecord& s, const char* name) {
        auto manifest = nlohmann::json::parse(s.manifestJson, nullptr, false);
        if (!manifest.is_object() || !manifest.contains("files") || !manifest["files"].is_array())
            throw Error(ErrorCode::internal, "snapshot " + s.id + " has no manifest");
        for (const auto& f : manifest["files"])
            if (f.is_object() && f.value("name", "") == name)
                return wanted.emplace_back(snapshotDir(s) + "/" + name, f);
        throw Error(ErrorCode::internal, "snapshot " + s.id + "'s manifest lists no " + name);
    };
    expect(snap, kMemoryFile);
    for (const auto& layerId : snap.layers) {
        auto layer =
            layerId == snap.id ? std::optional<SnapshotRecord>(snap) : snapshots_.find(layerId);
        if (!layer)
            throw Error(ErrorCode::internal,
                        "snapshot " + snap.id + " reads a layer that is gone: " + layerId);
        expect(*layer, kLayerFile);
    }
    for (const auto& [path, entry] : wanted) {
        auto id = safefs::identity(path);
        if (verified_.unchangedSinceVerified(path, id)) continue;
        auto d = safefs::digest(path);
        if (d.sha256 != entry.value("sha256", "") ||
            d.size != entry.value("size", std::uint64_t(0)))
            throw Error(
                ErrorCode::conflict,
                "snapshot " + snap.id + ": " + fs::path(path).filename().string() +
                    " does not match its manifest (changed or damaged); it cannot be restored");
        verified_.remember(path, id);
    }
}

// ---------------------------------------------------------------- warm templates

std::optional<SnapshotRecord> SandboxController::warmSnapshotFor(const TemplateInfo& tmpl) {
    std::optional<SnapshotRecord> found;
    for (auto& s : snapshots_.list(TenantScope::only(kWarmTenant)))
        if (s.kind == "warm" && s.state == SnapshotState::ready && s.templateName == tmpl.name &&
            s.templateDigest == tmpl.digest)
            found = std::move(s);
    return found;
}

bool SandboxController::hasWarmSnapshot(const std::string& templateName) {
    auto tmpl = templates_.find(templateName);
    return tmpl && warmSnapshotFor(*tmpl).has_value();
}

void SandboxController::warmTemplate(const std::string& templateName) {
    auto tmpl = templates_.find(templateName);
    if (!tmpl) throw Error(ErrorCode::not_found, "no template named '" + templateName + "'");
    // Snapshots of an older build of the template can never be used again.
    for (const auto& s : snapshots_.list(TenantScope::only(kWarmTenant)))
        if (s.templateName == tmpl->name && s.templateDigest != tmpl->digest &&
            s.state == SnapshotState::ready)
            snapshots_.updateState(s.id, SnapshotState::deleted);
    collectSnapshots();
    if (warmSnapshotFor(*tmpl)) return;
    auto started = steadyMillis();
    CreateSandboxRequest request;
    request.templateName = tmpl->name;
    request.boot = "cold";
    request.timeoutS = 0;
    auto sandbox = create(kWarmTenant, request);
    try {
        auto snap = snapshot(kWarmTenant, sandbox.id);
        logInfo("controller", "template " + tmpl->name + " is warm (" + snap.id + ", " +
                                  std::to_string(steadyMillis() - started) + " ms)");
    } catch (...) {
        destroy(kWarmTenant, sandbox.id);
        throw;
    }
    destroy(kWarmTenant, sandbox.id);
}

}  // namespace airlock

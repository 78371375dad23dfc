// Pause/resume, snapshots and clones, warm templates and timeouts: the parts
// of SandboxController that change what a sandbox's VM is, not what runs in it.
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

// "disk-3.qcow2" -> "disk-4.qcow2": each snapshot moves a sandbox onto a new overlay.
std::string nextOverlayName(const std::string& current) {
    unsigned generation = 0;
    if (std::sscanf(current.c_str(), "disk-%u.qcow2", &generation) != 1)
        throw Error(ErrorCode::internal, "unexpected overlay name " + current);
    return "disk-" + std::to_string(generation + 1) + ".qcow2";
}

}  // namespace

// ---------------------------------------------------------------- pause / resume / timeout

SandboxRecord SandboxController::transition(const std::string& tenant, const std::string& id,
                                            SandboxState from, SandboxState to, PauseKind kind,
                                            const std::string& reason,
                                            const std::function<bool()>& stillIdle) {
    const bool pausing = to == SandboxState::paused;
    requireOwned(tenant, id);
    auto lifecycle = lifecycleMutex(id);
    std::lock_guard op(*lifecycle);
    auto r = requireOwned(tenant, id);
    // A sandbox paused with its memory may still give that memory up.
    bool deepen = pausing && kind == PauseKind::hibernate && r.state == SandboxState::paused &&
                  !r.hibernated && !r.pausedWithoutMemory;
    if (r.state == to && !deepen) return r;  // pausing (resuming) twice is harmless
    if (r.state != from && !deepen)
        throw Error(ErrorCode::conflict, "sandbox " + id + " is " + sandboxStateName(r.state) +
                                             "; only a " + sandboxStateName(from) +
                                             " sandbox can be " + (pausing ? "paused" : "resumed"));
    if (stillIdle && !stillIdle()) return r;  // traffic came while it waited for the lock
    const bool withoutMemory = pausing ? kind == PauseKind::disk_only : r.pausedWithoutMemory;
    const bool hibernated = pausing ? kind == PauseKind::hibernate : r.hibernated;
    if (pausing && withoutMemory) {
        shutOff(r);
        store_.updatePaused(id, SandboxState::paused, true, false, reason);
    } else if (withoutMemory) {
        bootPaused(r);
    } else if (pausing && hibernated) {
        hibernate(r, reason);
    } else if (hibernated) {
        restoreHibernated(r);
    } else {
        // Written first; recover() reconciles a crash in between.
        store_.updatePaused(id, to, false, false, pausing ? reason : "");
        try {
            if (pausing)
                hypervisor_.suspendDomain(domainName(id));
            else
                hypervisor_.resumeDomain(domainName(id));
        } catch (...) {
            store_.updatePaused(id, from, false, false, pausing ? "" : r.pauseReason);
            throw;
        }
        // The time it slept is not idle time.
        if (!pausing)
            if (auto agent = agents_.get(id)) agent->touch();
    }
    // The timeout clock stops while it sleeps and starts again, whole, when
    // it wakes (as E2B's auto-pause and resume do).
    if (r.timeoutS > 0)
        store_.updateTimeout(id, r.timeoutS, pausing ? 0 : nowUnixSeconds() + r.timeoutS);
    r = requireOwned(tenant, id);
    logInfo("controller", "sandbox " + id + (pausing ? " paused" : " resumed") +
                              (withoutMemory ? " (without its memory)"
                               : hibernated  ? " (hibernated)"
                                             : "") +
                              (pausing ? " (" + reason + ")" : ""));
    nlohmann::json data{{"memory", !withoutMemory}, {"hibernated", hibernated}};
    if (pausing) data["reason"] = reason;
    record(id, tenant, pausing ? "sandbox.paused" : "sandbox.resumed", data);
    return r;
}

void SandboxController::hibernate(const SandboxRecord& r, const std::string& reason) {
    // Its memory goes to the data dir: at most its RAM (Error(insufficient_storage)).
    requireFreeSpace("a hibernation", static_cast<std::uint64_t>(r.memoryMib) << 20);
    std::string domain = domainName(r.id);
    std::string state = hibernationPath(r.id);
    std::error_code ec;
    fs::remove(state, ec);
    bool wasRunning = r.state == SandboxState::running;
    if (wasRunning) hypervisor_.suspendDomain(domain);
    try {
        hypervisor_.saveState(domain, state, sandboxDir(r.id));
    } catch (...) {
        fs::remove(state, ec);
        if (wasRunning) hypervisor_.resumeDomain(domain);
        throw;
    }
    // Written once the state is whole: recover() destroys a VM a crash left
    // behind after this, and resumes one it left before.
    store_.updatePaused(r.id, SandboxState::paused, false, true, reason);
    agents_.retire(r.id, "sandbox " + r.id + " was hibernated; its calls end (its processes go on "
                                             "when it resumes)");
    hypervisor_.destroyDomain(domain);
    agents_.forget(r.id);
}

void SandboxController::restoreHibernated(const SandboxRecord& r) {
    DomainSpec spec = domainSpec(r, templateToStart(r, "restore"));
    spec.incoming = true;
    try {
        hypervisor_.restoreDomain(spec, hibernationPath(r.id), sandboxDir(r.id));
    } catch (...) {
        // Still hibernated (its state file kept, the guest never ran): a
        // later resume tries again.
        hypervisor_.destroyDomain(domainName(r.id));
        throw;
    }
    // Once the guest runs, its disk moves past the saved memory: that state
    // is never loaded again (recover() adopts a VM a crash leaves from here).
    store_.updatePaused(r.id, SandboxState::running, false, false, "");
    std::error_code ec;
    try {
        hypervisor_.resumeDomain(domainName(r.id));
        fs::remove(hibernationPath(r.id), ec);
        auto agent = agents_.connect(r.id, std::chrono::seconds(30));
        reseed(*agent);  // its clock is behind by the time it slept
        agents_.adopt(r, std::move(agent));
    } catch (const std::exception& e) {
        agents_.retire(r.id, "sandbox " + r.id + " did not restore");
        hypervisor_.destroyDomain(domainName(r.id));
        agents_.forget(r.id);
        fs::remove(hibernationPath(r.id), ec);
        store_.updateState(r.id, SandboxState::error,
                           std::string("the restore from hibernation failed: ") + e.what());
        throw;
    }
}

void SandboxController::shutOff(const SandboxRecord& r) {
    if (r.disk.empty())
        throw Error(ErrorCode::bad_request, "sandbox " + r.id +
                                                " has no disk: a pause without its memory "
                                                "would keep nothing (pause it with its memory)");
    // What the guest still holds in its page cache reaches the disk first:
    // a guest that cannot sync keeps running, unpaused.
    auto agent = agents_.get(r.id);
    protocol::ExecRequest sync;
    sync.argv = {"sync"};
    sync.user = "root";
    auto synced = agent->exec(sync, 4096, std::chrono::seconds(60));
    if (synced.result.exit_code != 0)
        throw Error(ErrorCode::agent_error,
                    "sandbox " + r.id + " could not sync its disk: " +
                        (synced.result.error.empty() ? "sync failed" : synced.result.error));
    // Written first: recover() shuts off a VM a crash left behind.
    store_.updatePaused(r.id, SandboxState::paused, true, false, r.pauseReason);
    agents_.retire(r.id, "sandbox " + r.id + " was paused without its memory: its processes ended");
    hypervisor_.destroyDomain(domainName(r.id));
    agents_.forget(r.id);
}

TemplateInfo SandboxController::templateToStart(const SandboxRecord& r, const char* how) const {
    auto tmpl = templates_.find(r.templateName);
    if (!tmpl)
        throw Error(ErrorCode::conflict, "sandbox " + r.id + " was made from template '" +
                                             r.templateName +
                                             "', which this server no longer has to " + how +
                                             " it");
    return *tmpl;
}

void SandboxController::bootPaused(const SandboxRecord& r) {
    auto tmpl = templateToStart(r, "boot");
    try {
        hypervisor_.startDomain(domainSpec(r, tmpl));
        auto agent = agents_.connect(r.id, config_.bootTimeout);
        if (!r.volumesJson.empty()) mountVolumes(r, *agent);
        agents_.adopt(r, std::move(agent));
    } catch (...) {
        // Still paused without memory: a later resume boots it again.
        agents_.retire(r.id, "sandbox " + r.id + " did not boot");
        hypervisor_.destroyDomain(domainName(r.id));
        agents_.forget(r.id);
        throw;
    }
    store_.updatePaused(r.id, SandboxState::running, false);
}

SandboxRecord SandboxController::pause(const std::string& tenant, const std::string& id,
                                       PauseKind kind) {
    return transition(tenant, id, SandboxState::running, SandboxState::paused, kind);
}

SandboxRecord SandboxController::resume(const std::string& tenant, const std::string& id) {
    return transition(tenant, id, SandboxState::paused, SandboxState::running);
}

std::int64_t SandboxController::wake(const std::string& tenant, const std::string& id) {
    auto r = requireOwned(tenant, id);
    if (r.state != SandboxState::paused || !r.autoResume) return 0;
    auto started = steadyMillis();
    transition(tenant, id, SandboxState::paused, SandboxState::running);
    auto took = std::max<std::int64_t>(1, steadyMillis() - started);
    record(id, tenant, "sandbox.woken", {{"resume_ms", took}, {"was", r.hibernated ? "hibernated" : r.pausedWithoutMemory ? "paused_without_memory" : "paused"}});
    return took;
}

void SandboxController::enforceIdle(const std::vector<SandboxRecord>& all) {
    std::set<std::string> awaitingDecision;  // an approved command must find it running
    bool any = false;
    for (const auto& r : all) any = any || (!r.idleJson.empty() && r.state == SandboxState::running);
    if (!any) return;
    for (const auto& g : gates_.pending(TenantScope::all())) awaitingDecision.insert(g.sandboxId);
    for (const auto& listed : all) {
        if (listed.state != SandboxState::running || listed.idleJson.empty()) continue;
        if (awaitingDecision.count(listed.id)) continue;
        auto rule = idleRuleFrom(listed.idleJson);
        if (!rule) continue;
        std::shared_ptr<AgentConnection> agent;
        try {
            agent = agents_.get(listed.id);
        } catch (const std::exception&) {
            continue;  // no session now: nothing to judge it by
        }
        // Read from the session it has when asked (a wake may have made a new one).
        auto idleFor = [this, id = listed.id, rule] {
            try {
                auto a = agents_.get(id)->activity();
                return a.openStreams == 0 &&
                       steadyMillis() - a.lastTrafficMs >= rule->afterS * 1000;
            } catch (const std::exception&) {
                return false;
            }
        };
        if (!agent || !idleFor()) continue;
        bool hib = rule->action == IdleAction::hibernate;
        try {
            transition(listed.tenant, listed.id, SandboxState::running, SandboxState::paused,
                       hib ? PauseKind::hibernate : PauseKind::memory, "idle", idleFor);
        } catch (const std::exception& e) {
            logWarn("controller", "idle " + std::string(hib ? "hibernate" : "pause") + " of " +
                                      listed.id + " failed: " + e.what());
            // No room for its memory on disk: it keeps it, paused all the same.
            if (hib) {
                try {
                    transition(listed.tenant, listed.id, SandboxState::running,
                               SandboxState::paused, PauseKind::memory, "idle", idleFor);
                } catch (const std::exception& again) {
                    logWarn("controller", "idle pause of " + listed.id + " failed: " + again.what());
                }
            }
        }
    }
}

SandboxRecord SandboxController::setNetwork(const std::string& tenant, const std::string& id,
                                            const std::vector<std::string>& allow) {
    auto list = network_.allowlist(allow);
    requireOwned(tenant, id);
    tenantLimits_.requireWithinFloor(tenant, {}, list.texts());
    auto lifecycle = lifecycleMutex(id);
    std::lock_guard op(*lifecycle);
    auto r = requireOwned(tenant, id);
    if (r.state != SandboxState::running && r.state != SandboxState::paused)
        throw Error(ErrorCode::conflict, "sandbox " + id + " is " + sandboxStateName(r.state));
    auto previous = std::exchange(r.network, list.texts());
    store_.updateNetwork(id, r.network);
    network_.apply(id, list);
    record(id, tenant, "network.updated", {{"allow", list.texts()}, {"previous", previous}});
    return r;
}

std::size_t SandboxController::applyTenantSecret(const std::string& tenant,
                                                 const std::string& name) {
    if (!config_.tenantSecrets) return 0;
    std::size_t changed = 0;
    for (const auto& listed : store_.list(TenantScope::only(tenant))) {
        if (listed.state != SandboxState::running && listed.state != SandboxState::paused)
            continue;
        try {
            auto lifecycle = lifecycleMutex(listed.id);
            std::lock_guard op(*lifecycle);
            auto r = store_.find(listed.id);
            if (!r || r->tenant != tenant ||
                (r->state != SandboxState::running && r->state != SandboxState::paused))
                continue;
            // Read under the sandbox's lock: of two changes racing, the one
            // applied last is what the store holds, never an older read.
            auto current = config_.tenantSecrets->secretOf(tenant, name);
            auto secrets = secrets_.open(*r);
            auto it = secrets.find(name);
            if (it != secrets.end() && !it->second.fromTenant) continue;  // the create's own
            if (!current && it == secrets.end()) continue;
            bool hadCa = !secrets_.egressCaCertificate(*r).empty();
            if (current) {
                SecretSpec kept = *current;
                // Processes hold the placeholder they were given.
                if (it != secrets.end() && it->second.inject)
                    kept.inject->placeholder = it->second.inject->placeholder;
                if (it == secrets.end()) r->secretNames.push_back(name);
                secrets[name] = std::move(kept);
            } else {
                secrets.erase(it);
                std::erase(r->secretNames, name);
            }
            r->secretsSealed = secrets_.seal(secrets, r->id, r->secretsSealed);
            store_.updateSecrets(r->id, r->secretsSealed, r->secretNames);
            // A paused guest cannot take a first CA now; it is installed
            // when its agent is adopted again.
            agents_.refreshInjections(*r, r->state == SandboxState::running && !hadCa);
            nlohmann::json data{{"name", name}, {"tenant_secret", true}};
            if (current)
                data["inject"] = {{"hosts", current->inject->hosts},
                                  {"header", current->inject->header}};
            record(r->id, tenant, current ? "secret.set" : "secret.removed", data);
            ++changed;
        } catch (const std::exception& e) {
            logWarn("controller", "tenant secret " + name + " not taken into " + listed.id +
                                      ": " + e.what());
        }
    }
    return changed;
}

bool SandboxController::setSecret(const std::string& tenant, const std::string& id,
                                  const std::string& name, const SecretSpec& secret) {
    requireOwned(tenant, id);
    auto lifecycle = lifecycleMutex(id);
    std::lock_guard op(*lifecycle);
    auto r = requireOwned(tenant, id);
    if (r.state != SandboxState::running)
        throw Error(ErrorCode::conflict, "sandbox " + id + " is " + sandboxStateName(r.state) +
                                             ": a secret is added to a running sandbox");
    auto secrets = secrets_.open(r);
    bool added = !secrets.count(name);
    if (added && secrets.size() >= 64)
        throw Error(ErrorCode::bad_request, "sandbox " + id + " has 64 secrets already");
    SecretSpec kept = secret;
    // A replaced injected secret keeps its placeholder: processes hold it.
    if (kept.inject && !added && secrets[name].inject)
        kept.inject->placeholder = secrets[name].inject->placeholder;
    secrets[name] = kept;
    bool hadCa = !secrets_.egressCaCertificate(r).empty();
    r.secretsSealed = secrets_.seal(secrets, r.id, r.secretsSealed);
    if (added) r.secretNames.push_back(name);
    store_.updateSecrets(r.id, r.secretsSealed, r.secretNames);
    // The proxy adds it from the next connection on; a first injected
    // secret brings the CA the guest must trust first.
    agents_.refreshInjections(r, !hadCa);
    nlohmann::json data{{"name", name}, {"replaced", !added}};
    if (kept.inject)
        data["inject"] = {{"hosts", kept.inject->hosts}, {"header", kept.inject->header}};
    record(id, tenant, "secret.set", data);
    return added;
}

SandboxRecord SandboxController::setTimeout(const std::string& tenant, const std::string& id,
                                            std::int64_t timeoutS) {
    if (timeoutS < 0 || timeoutS > config_.maxTimeoutS)
        throw Error(ErrorCode::bad_request, "timeout_s must be between 0 (none) and " +
                                                std::to_string(config_.maxTimeoutS));
    auto r = requireOwned(tenant, id);
    // A sleeping sandbox's clock starts when it wakes.
    bool running = r.state == SandboxState::running;
    store_.updateTimeout(id, timeoutS, timeoutS > 0 && running ? nowUnixSeconds() + timeoutS : 0);
    return requireOwned(tenant, id);
}

void SandboxController::enforceTimeouts() {
    gates_.expire();
    auto all = store_.list(TenantScope::all());
    enforceIdle(all);
    auto now = nowUnixSeconds();
    for (const auto& listed : all) {
        if (listed.expiresAt == 0 || listed.expiresAt > now) continue;
        // Read again: one sweep can take a while (a guest's sync), and a
        // sandbox given a new life meanwhile (a connect, traffic that woke
        // it, a new timeout) keeps it.
        auto fresh = store_.find(listed.id);
        if (!fresh || fresh->expiresAt == 0 || fresh->expiresAt > nowUnixSeconds()) continue;
        const SandboxRecord& r = *fresh;
        if (r.state != SandboxState::running && r.state != SandboxState::paused) continue;
        try {
            if (auto action = timeoutActionFrom(r.onTimeout); action != TimeoutAction::kill) {
                std::string how = "pause";
                if (r.state == SandboxState::running) {
                    if (action == TimeoutAction::pause) {
                        transition(r.tenant, r.id, SandboxState::running, SandboxState::paused,
                                   PauseKind::memory, "timeout");
                    } else {
                        try {
                            transition(r.tenant, r.id, SandboxState::running,
                                       SandboxState::paused, PauseKind::disk_only, "timeout");
                        } catch (const Error& e) {
                            // The guest's sync failed or hung (it is root
                            // there): it is paused with its memory instead,
                            // which it cannot refuse; never left running.
                            logWarn("controller", "sandbox " + r.id +
                                                      ": a pause without memory failed (" +
                                                      e.what() + "): paused with it");
                            transition(r.tenant, r.id, SandboxState::running,
                                       SandboxState::paused, PauseKind::memory, "timeout");
                            how = "pause (with memory: the pause without it failed)";
                        }
                    }
                }
                // Not woken again meanwhile: a paused-by-timeout sandbox waits for its owner.
                if (auto current = store_.find(r.id);
                    current && current->state == SandboxState::paused)
                    store_.updateTimeout(r.id, r.timeoutS, 0);
                logInfo("controller", "sandbox " + r.id + " paused: its timeout passed");
                record(r.id, r.tenant, "sandbox.timeout", {{"action", how}});
            } else {
                record(r.id, r.tenant, "sandbox.timeout", {{"action", "kill"}});
                destroy(r.tenant, r.id, "its timeout passed (timeout_s)");
                logInfo("controller", "sandbox " + r.id + " killed: its timeout passed");
            }
        } catch (const std::exception& e) {
            logError("controller", "timeout of " + r.id + ": " + e.what());
        }
    }
}

// ---------------------------------------------------------------- snapshots

namespace {

void requireValidName(const SnapshotName& name) {
    if (name.alias.empty() && name.tag.empty()) return;
    if (!isValidSnapshotAlias(name.alias))
        throw Error(ErrorCode::bad_request, "a snapshot name is 1 to 64 of a-z, 0-9, '-' and '_'");
    if (!isValidSnapshotTag(name.tag))
        throw Error(ErrorCode::bad_request,
                    "a snapshot tag is 1 to 64 of a-z, 0-9, '-', '_' and '.'");
}

}  // namespace

SnapshotRecord SandboxController::snapshot(const std::string& tenant, const std::string& id,
                                           const SnapshotName& name) {
    requireValidName(name);
    return takeSnapshot(tenant, id, name, tenant == kWarmTenant ? "warm" : "user");
}

SnapshotRecord SandboxController::buildSnapshot(const std::string& tenant, const std::string& id,
                                                const std::string& kind) {
    if (kind != "layer" && kind != "template")
        throw Error(ErrorCode::internal, "no build snapshot of kind " + kind);
    return takeSnapshot(tenant, id, SnapshotName{}, kind);
}

SnapshotRecord SandboxController::takeSnapshot(const std::string& tenant, const std::string& id,
                                               const SnapshotName& name, const std::string& kind) {
    bool inQuota = kind == "user";
    requireOwned(tenant, id);
    requireFreeSpace("snapshot");
    if (inQuota) tenantLimits_.requireSnapshotQuota(tenant);  // early, cheap; checked again below
    auto lifecycle = lifecycleMutex(id);
    std::lock_guard op(*lifecycle);
    auto r = requireOwned(tenant, id);
    if (r.state != SandboxState::running && r.state != SandboxState::paused)
        throw Error(ErrorCode::conflict,
                    "sandbox " + id + " is " + sandboxStateName(r.state) +
                        "; only a running or paused sandbox can be snapshotted");
    if (r.pausedWithoutMemory)
        throw Error(ErrorCode::conflict, "sandbox " + id +
                                             " is paused without its memory (no VM to capture): "
                                             "resume it first");
    if (r.hibernated)
        throw Error(ErrorCode::conflict,
                    "sandbox " + id + " is hibernated (no VM to capture): resume it first");
    auto tmpl = templates_.find(r.templateName);
    if (!tmpl)
        throw Error(ErrorCode::conflict,
                    "template '" + r.templateName + "' of sandbox " + id + " is gone");

    SnapshotRecord s;
    s.id = newId("snap-");
    s.tenant = tenant;
    s.kind = kind;
    s.sourceSandbox = id;
    s.templateName = tmpl->name;
    s.templateDigest = tmpl->digest;
    s.vcpus = r.vcpus;
    s.memoryMib = r.memoryMib;
    s.hasDisk = !r.disk.empty();
    s.layers = r.layers;
    if (s.hasDisk) s.layers.push_back(s.id);
    s.createdAt = nowTimestamp();
    s.name = name;
    s.volumesJson = r.volumesJson;
    {
        // Checked and counted in one step: two snapshots at once cannot both
        // take the tenant's last one.
        auto quota = tenantLimits_.quotaLock(tenant);
        std::lock_guard counted(*quota);
        if (inQuota) tenantLimits_.requireSnapshotQuota(tenant);
        snapshots_.insert(s);  // written first: recover() removes a half-taken snapshot
    }
    if (workspaces_) workspaces_->copy(id, s.id);  // its clones get the sandbox's workspace

    std::string dir = snapshotLibrary_.dirOf(s);
    std::string domain = domainName(id);
    bool wasRunning = r.state == SandboxState::running;
    bool diskSwitched = false;
    bool volumesUnmounted = false;
    std::string nextOverlay;
    auto started = steadyMillis();
    try {
        fs::create_directories(dir);
        // QEMU opens the frozen layer (as a backing file) by path.
        fs::permissions(dir, fs::perms(0711));
        // Its volumes are unmounted for the capture: a clone mounts them
        // afresh, never with another guest's cached view of them.
        if (!r.volumesJson.empty()) {
            if (!wasRunning)
                throw Error(ErrorCode::conflict, "sandbox " + id +
                                                     " has volumes: snapshot it while it runs "
                                                     "(they are unmounted for the capture)");
            volumesUnmounted = true;  // some may be: the mount script skips mounted ones
            if (!unmountVolumes(r, *agents_.get(id)))
                throw Error(ErrorCode::conflict,
                            "sandbox " + id +
                                " could not unmount its volumes for the snapshot (a process "
                                "has files open there?)");
        }
        if (wasRunning) hypervisor_.suspendDomain(domain);
        if (s.hasDisk) {
            // The current overlay becomes the frozen layer: linked under the
            // snapshot (its canonical path, named in every later overlay's
            // header), the sandbox goes on writing a new overlay on top.
            // QEMU can write its directory: the overlay is opened without
            // following links, checked to be a regular file, and that very
            // file is linked (and later chmod/chown'ed through its fd).
            std::string layer = snapshotLibrary_.layerPath(s);
            UniqueFd frozen =
                safefs::linkFile(sandboxDir(id), r.disk, dir, SnapshotLibrary::kLayerFile);
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
        hypervisor_.saveState(domain, snapshotLibrary_.statePath(s), sandboxDir(id));
        if (wasRunning) hypervisor_.resumeDomain(domain);
        if (volumesUnmounted) mountVolumes(r, *agents_.get(id));
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
        if (volumesUnmounted) {
            try {
                mountVolumes(r, *agents_.get(id));
            } catch (const std::exception& again) {
                logError("controller", "cannot mount the volumes of " + id +
                                           " again after a failed snapshot: " + again.what());
            }
        }
        // Once switched, the sandbox's disk reads the frozen layer: it stays
        // until the sandbox is gone.
        std::error_code ec;
        if (!diskSwitched && !nextOverlay.empty())
            fs::remove(sandboxDir(id) + "/" + nextOverlay, ec);
        try {
            snapshotLibrary_.abandon(s, diskSwitched);
        } catch (const std::exception& again) {
            logError("controller", "snapshot " + s.id + " left behind: " + again.what());
        }
        throw;
    }
    auto pausedMs = steadyMillis() - started;

    std::int64_t total = snapshotLibrary_.seal(s);
    record(id, tenant, "snapshot.created",
           {{"snapshot", s.id}, {"size_bytes", total}, {"held_ms", pausedMs}});
    if (kind != "layer") spares_->want(spareShapeOf(s), std::chrono::milliseconds(0), s.id);
    logInfo("controller", "snapshot " + s.id + " of " + id + ": " + std::to_string(total) +
                              " bytes, sandbox held for " + std::to_string(pausedMs) + " ms");
    return *snapshots_.find(s.id);
}

void SandboxController::deleteBuildSnapshot(const std::string& id) {
    snapshotLibrary_.removeBuildSnapshot(id);
    spares_->trim();
}

void SandboxController::deleteSnapshot(const std::string& tenant, const std::string& id) {
    snapshotLibrary_.remove(tenant, id);
    spares_->trim();
    logInfo("controller", "snapshot " + id + " deleted");
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
        auto layerGib = snapshotLibrary_.cloneDiskGib(snap, *tmpl);
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
    // Its snapshot's volumes (the disks its memory state knows), or as many
    // of the request's own in their place.
    auto mounts = volumeMountsFrom(snap.volumesJson);
    if (request.volumes && request.volumes->size() != mounts.size())
        throw Error(ErrorCode::bad_request,
                    mounts.empty()
                        ? "snapshot " + snap.id +
                              " was taken without volumes: its clones cannot mount any (a "
                              "sandbox with volumes boots cold from a template)"
                        : "a clone of snapshot " + snap.id + " mounts " +
                              std::to_string(mounts.size()) + " volume(s), as its sandbox did: ask " +
                              std::to_string(mounts.size()) + " or none");
    if (!mounts.empty() && !volumes_)
        throw Error(ErrorCode::conflict, "snapshot " + snap.id + " has volumes and this server keeps none");
    auto quota = tenantLimits_.quotaLock(tenant);
    std::unique_lock counted(*quota);  // checked and counted in one step
    std::unique_lock<std::mutex> attached;
    try {
        tenantLimits_.requireSandboxQuota(r);
        if (!mounts.empty()) {
            attached = volumes_->attachLock();
            mounts = request.volumes ? volumes_->resolve(tenant, *request.volumes)
                                     : volumes_->recheck(tenant, mounts);
            r.volumesJson = volumeMountsJson(mounts);
        }
    } catch (...) {
        if (r.qemuUid > 0) uids_.release(static_cast<std::uint32_t>(r.qemuUid));
        throw;
    }
    // A spare has no volume disks: a clone with volumes starts its own VM.
    std::optional<SparePool::Taken> taken =
        mounts.empty() ? spares_->take(shape, snap.id) : std::nullopt;
    std::optional<std::string> spare;
    if (taken) spare = taken->id;
    if (spare) {
        // The spare's VM, directory and uid become this sandbox's; what was
        // sealed for the new id is sealed again for the spare's.
        auto spareRecord = store_.find(*spare);
        if (r.qemuUid > 0) uids_.release(static_cast<std::uint32_t>(r.qemuUid));
        r.qemuUid = spareRecord ? spareRecord->qemuUid : 0;
        r.secretsSealed = secrets_.reseal(r.secretsSealed, r.id, *spare);
        std::string reservedAs = r.id;
        r.id = *spare;
        store_.replace(r);  // the spare's row becomes this sandbox, in one write
        tenantLimits_.renamed(r, reservedAs);
    } else {
        store_.insert(r);  // written first (with the layers it reads: the GC keeps them)
    }
    if (attached.owns_lock()) attached.unlock();
    counted.unlock();
    std::string dir = sandboxDir(r.id);
    try {
        auto started = steadyMillis();
        snapshotLibrary_.verify(snap);
        auto verified = steadyMillis();
        if (spare) {
            if (!taken->loaded)
                hypervisor_.loadState(domainName(r.id), snapshotLibrary_.statePath(snap), dir);
        } else {
            prepareSandboxDir(r);
            if (!r.disk.empty())
                createOverlay(stagingDir(), dir, r.disk, snapshotLibrary_.layerPath(snap),
                              r.diskBytes, qemuOwner(r));
            DomainSpec spec = domainSpec(r, *tmpl);
            spec.incoming = true;
            hypervisor_.restoreDomain(spec, snapshotLibrary_.statePath(snap), dir);
        }
        auto loaded = steadyMillis();
        hypervisor_.resumeDomain(domainName(r.id));
        // A new hello gives the clone its own agent session; then fresh
        // entropy before anyone can run a command in it.
        std::shared_ptr<AgentConnection> agent = agents_.connect(r.id, std::chrono::seconds(30));
        reseed(*agent);
        if (!mounts.empty()) mountVolumes(r, *agent);
        agents_.adopt(r, std::move(agent));
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
        nlohmann::json created{{"template", tmpl->name},
                               {"digest", tmpl->digest},
                               {"boot", "restore"},
                               {"snapshot", snap.id},
                               {"policy", nlohmann::json::parse(r.policyJson)},
                               {"network", r.network}};
        if (!request.settingsFrom.empty()) created["settings_from"] = request.settingsFrom;
        if (!r.volumesJson.empty()) created["volumes"] = nlohmann::json::parse(r.volumesJson);
        record(r.id, r.tenant, "sandbox.created", created);
        return r;
    } catch (const std::exception& e) {
        failCreate(r.id, e);
        spares_->want(shape, std::chrono::milliseconds(0), snap.id);
        throw;
    }
}

// ---------------------------------------------------------------- warm templates

bool SandboxController::hasWarmSnapshot(const std::string& templateName) {
    auto tmpl = templates_.find(templateName);
    return tmpl && snapshotLibrary_.warmFor(*tmpl, kWarmTenant).has_value();
}

void SandboxController::warmTemplate(const std::string& templateName) {
    auto tmpl = templates_.find(templateName);
    if (!tmpl) throw Error(ErrorCode::not_found, "no template named '" + templateName + "'");
    // Snapshots of an older build of the template can never be used again.
    snapshotLibrary_.retireOldWarm(*tmpl, kWarmTenant);
    snapshotLibrary_.collect();
    if (snapshotLibrary_.warmFor(*tmpl, kWarmTenant)) return;
    auto started = steadyMillis();
    CreateSandboxRequest request;
    request.templateName = tmpl->name;
    request.boot = BootMode::cold;
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

// ---------------------------------------------------------------- volumes in the guest

void SandboxController::mountVolumes(const SandboxRecord& r, AgentConnection& agent) {
    protocol::ExecRequest mount;
    mount.argv = {"sh", "-c", SandboxVolumes::mountScript(volumeMountsFrom(r.volumesJson))};
    mount.user = "root";
    auto done = agent.exec(mount, 4096, std::chrono::seconds(60));
    if (done.result.exit_code != 0)
        throw Error(ErrorCode::agent_error,
                    "sandbox " + r.id + " could not mount its volumes: " +
                        (done.result.error.empty() ? done.stderrData.substr(0, 300)
                                                   : done.result.error));
}

bool SandboxController::unmountVolumes(const SandboxRecord& r, AgentConnection& agent) {
    protocol::ExecRequest unmount;
    unmount.argv = {"sh", "-c", SandboxVolumes::unmountScript(volumeMountsFrom(r.volumesJson))};
    unmount.user = "root";
    auto done = agent.exec(unmount, 4096, std::chrono::seconds(20));
    return done.result.exit_code == 0;
}

}  // namespace airlock

// Spare VMs: for each clone shape in use, QEMU started ahead of time and
// paused waiting for a migration stream. libvirt's own start-up is about a
// second here under TCG, more than loading the state; a spare takes it off
// the clone path. A shape is in use while a ready snapshot of it exists or a
// live sandbox has it: a fork usually follows its snapshot at once, sooner
// than a spare could start. A disk is opened when QEMU starts and its
// backing layer differs per snapshot, so a disk-backed snapshot is a shape
// of its own, and only the latest ready one of each template shape has a
// spare (one VM per shape, as for disk-less shapes).
//
// A snapshot just taken (or just cloned) also has its memory state loaded
// into a spare ahead of time: the next clone of it only resumes the VM. The
// latest snapshot of a shape wins the spare; a deleted snapshot's state
// leaves every spare with it.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "controller/SandboxController.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "controller/DiskLayers.hpp"
#include "core/Log.hpp"

namespace airlock {

std::string SandboxController::shapeOf(const std::string& templateName, const std::string& digest,
                                       unsigned vcpus, unsigned memoryMib) {
    return templateName + "|" + digest + "|" + std::to_string(vcpus) + "|" +
           std::to_string(memoryMib);
}

std::string SandboxController::spareShapeOf(const SnapshotRecord& s) {
    std::string shape = shapeOf(s.templateName, s.templateDigest, s.vcpus, s.memoryMib);
    return s.hasDisk ? shape + "|" + s.id : shape;
}

void SandboxController::wantSpare(const std::string& shape, std::chrono::milliseconds delay,
                                  const std::string& snapshot) {
    if (config_.sparesPerShape == 0) return;
    {
        std::lock_guard lock(sparesMutex_);
        if (sparesStopping_) return;
        spareRequests_.push_back({shape, std::chrono::steady_clock::now() + delay, snapshot});
    }
    sparesCv_.notify_all();  // the worker, not a clone waiting for a spare
}

std::optional<SandboxController::TakenSpare> SandboxController::takeSpare(
    const std::string& shape, const std::string& snapshot) {
    // A spare already on its way (asked for by the snapshot just taken, or by
    // the previous clone) is ready sooner than a VM started now, which would
    // also compete with it for the cores: wait for it, a bounded time.
    constexpr auto kSpareWait = std::chrono::seconds(5);
    std::unique_lock lock(sparesMutex_);
    bool asked = false;
    for (auto& request : spareRequests_)
        if (request.shape == shape) {
            request.due = std::min(request.due, std::chrono::steady_clock::now());  // wanted now
            asked = true;
        }
    if (asked) sparesCv_.notify_all();
    auto usable = [&](bool loadedOnly) -> std::optional<std::size_t> {
        auto it = spares_.find(shape);
        if (it == spares_.end()) return std::nullopt;
        for (std::size_t i = 0; i < it->second.size(); ++i) {
            auto loaded = spareLoaded_.find(it->second[i]);
            if (loadedOnly ? loaded != spareLoaded_.end() && loaded->second == snapshot
                           : loaded == spareLoaded_.end())
                return i;
        }
        return std::nullopt;
    };
    auto ready = [&] { return usable(true) || usable(false); };
    auto coming = [&] {
        return spareStarting_ == shape ||
               std::any_of(spareRequests_.begin(), spareRequests_.end(),
                           [&](const SpareRequest& r) { return r.shape == shape; });
    };
    // The state being loaded for this very snapshot is worth the wait even
    // when a spare without state is there already.
    auto loadingThis = [&] { return spareStarting_ == shape && spareLoading_ == snapshot; };
    sparesCv_.wait_for(lock, kSpareWait, [&] {
        return sparesStopping_ || usable(true) || (!loadingThis() && (ready() || !coming()));
    });
    if (sparesStopping_) return std::nullopt;
    auto index = usable(true);
    bool loaded = index.has_value();
    if (!index) index = usable(false);
    if (!index) return std::nullopt;
    auto& ids = spares_[shape];
    TakenSpare taken{ids[*index], loaded};
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(*index));
    spareLoaded_.erase(taken.id);
    return taken;
}

std::size_t SandboxController::spareCount() {
    std::lock_guard lock(sparesMutex_);
    std::size_t n = 0;
    for (const auto& [shape, ids] : spares_) n += ids.size();
    return n;
}

bool SandboxController::sparesIdle() {
    std::lock_guard lock(sparesMutex_);
    return !spareStarting_ && spareRequests_.empty();
}

void SandboxController::spareWorker() {
    while (true) {
        std::string shape, snapshot;
        std::optional<std::string> reuse, evict;
        {
            std::unique_lock lock(sparesMutex_);
            while (true) {
                if (sparesStopping_) return;
                auto next = std::min_element(
                    spareRequests_.begin(), spareRequests_.end(),
                    [](const SpareRequest& a, const SpareRequest& b) { return a.due < b.due; });
                if (next == spareRequests_.end()) {
                    sparesCv_.wait(lock);
                    continue;
                }
                if (next->due > std::chrono::steady_clock::now()) {
                    auto due = next->due;  // the wait may change the queue
                    sparesCv_.wait_until(lock, due);
                    continue;
                }
                shape = next->shape;
                snapshot = next->snapshot;
                spareRequests_.erase(next);
                auto& ids = spares_[shape];
                auto holds = [&](const std::string& id, const std::string& snap) {
                    auto it = spareLoaded_.find(id);
                    return snap.empty() ? it == spareLoaded_.end()
                                        : it != spareLoaded_.end() && it->second == snap;
                };
                if (!snapshot.empty() && std::any_of(ids.begin(), ids.end(), [&](auto& id) {
                        return holds(id, snapshot);
                    })) {
                    sparesCv_.notify_all();  // loaded already: a clone may wait on this request
                    continue;
                }
                if (snapshot.empty() && ids.size() >= config_.sparesPerShape) {
                    sparesCv_.notify_all();
                    continue;
                }
                // A preload takes a spare still waiting for state if there is
                // one; when the shape is full of spares holding other
                // snapshots, the latest snapshot wins the oldest one's place.
                reuse.reset();
                evict.reset();
                if (!snapshot.empty()) {
                    auto plain = std::find_if(ids.begin(), ids.end(),
                                              [&](auto& id) { return holds(id, ""); });
                    if (plain != ids.end()) {
                        reuse = *plain;
                        ids.erase(plain);
                    } else if (!ids.empty() && ids.size() >= config_.sparesPerShape) {
                        evict = ids.front();
                        spareLoaded_.erase(ids.front());
                        ids.erase(ids.begin());
                    }
                }
                spareStarting_ = shape;
                if (!snapshot.empty()) spareLoading_ = snapshot;
                break;
            }
        }
        try {
            if (evict) teardown(*evict);
            if (snapshot.empty()) {
                if (auto id = bootSpare(shape)) offerSpare(shape, *id, "");
            } else {
                preloadSpare(shape, snapshot, reuse);
            }
        } catch (const std::exception& e) {
            logWarn("spares", "cannot start a spare VM for " + shape + ": " + e.what());
        }
        // Its shape or snapshot may have gone meanwhile: trimmed while still
        // "starting", so a delete waiting for this start returns only once
        // the VM it no longer wants is torn down, not while it still is.
        trimSpares(false);
        {
            std::lock_guard lock(sparesMutex_);
            spareStarting_.reset();
            spareLoading_.reset();
        }
        sparesCv_.notify_all();  // ready or not: clones waiting for it go on
    }
}

std::map<std::string, SandboxController::SpareShape> SandboxController::spareShapes() {
    std::map<std::string, SpareShape> wanted;
    std::map<std::string, const SnapshotRecord*> latestWithDisk;  // by template shape
    auto snapshots = snapshots_.list(TenantScope::all());
    for (const auto& s : snapshots) {
        if (s.state != SnapshotState::ready) continue;
        if (!s.hasDisk) {
            wanted.emplace(spareShapeOf(s),
                           SpareShape{s.templateName, s.templateDigest, s.vcpus, s.memoryMib, ""});
            continue;
        }
        auto& latest = latestWithDisk[shapeOf(s.templateName, s.templateDigest, s.vcpus, s.memoryMib)];
        if (!latest || latest->createdAt < s.createdAt || (latest->createdAt == s.createdAt && latest->id < s.id))
            latest = &s;
    }
    for (const auto& [shape, s] : latestWithDisk)
        wanted.emplace(spareShapeOf(*s),
                       SpareShape{s->templateName, s->templateDigest, s->vcpus, s->memoryMib, s->id});
    for (const auto& r : store_.list(TenantScope::all())) {
        if (r.tenant == kSpareTenant || !r.disk.empty()) continue;
        if (r.state != SandboxState::running && r.state != SandboxState::paused) continue;
        auto tmpl = templates_.find(r.templateName);
        if (!tmpl || !tmpl->diskPath.empty()) continue;
        wanted.emplace(shapeOf(tmpl->name, tmpl->digest, r.vcpus, r.memoryMib),
                       SpareShape{tmpl->name, tmpl->digest, r.vcpus, r.memoryMib, ""});
    }
    return wanted;
}

std::optional<std::string> SandboxController::bootSpare(const std::string& shape) {
    auto wanted = spareShapes();
    auto it = wanted.find(shape);
    if (it == wanted.end()) return std::nullopt;
    const SpareShape& want = it->second;
    auto tmpl = templates_.find(want.templateName);
    if (!tmpl || tmpl->digest != want.digest || tmpl->diskPath.empty() != want.diskSnapshot.empty())
        return std::nullopt;
    std::optional<SnapshotRecord> snap;
    if (!want.diskSnapshot.empty()) {
        snap = snapshots_.find(want.diskSnapshot);
        if (!snap || snap->state != SnapshotState::ready) return std::nullopt;
    }
    CreateSandboxRequest request;
    request.templateName = tmpl->name;
    request.vcpus = want.vcpus;
    request.memoryMib = want.memoryMib;
    request.timeoutS = 0;
    if (snap) request.diskGib = cloneDiskGib(*snap, *tmpl);
    SandboxRecord r = newRecord(kSpareTenant, request, *tmpl);
    // Its disk reads the snapshot's layers: the GC keeps them while it lives.
    if (snap) r.layers = snap->layers;
    // A spare stays in state creating: recover() removes it after a crash.
    store_.insert(r);
    try {
        prepareSandboxDir(r);
        if (snap)
            createOverlay(stagingDir(), sandboxDir(r.id), r.disk, snapshotLayerPath(*snap),
                          r.diskBytes, qemuOwner(r));
        DomainSpec spec = domainSpec(r, *tmpl);
        spec.incoming = true;
        hypervisor_.startDomain(spec);
    } catch (...) {
        try {
            teardown(r.id);
        } catch (...) {
        }
        throw;
    }
    return r.id;
}

void SandboxController::preloadSpare(const std::string& shape, const std::string& snapshot,
                                     std::optional<std::string> reuse) {
    auto snap = snapshots_.find(snapshot);
    if (!snap || snap->state != SnapshotState::ready) {
        if (reuse) offerSpare(shape, *reuse, "");  // back as it was
        return;
    }
    std::string id = reuse ? *reuse : bootSpare(shape).value_or("");
    if (id.empty()) return;
    try {
        // The files are checked as for any restore: a damaged snapshot never
        // reaches a VM, not even a spare.
        verifySnapshotFiles(*snap);
        hypervisor_.loadState(domainName(id), snapshotStatePath(*snap), sandboxDir(id));
    } catch (...) {
        try {
            teardown(id);  // a QEMU whose load failed takes no other state
        } catch (...) {
        }
        throw;
    }
    offerSpare(shape, id, snapshot);
    logDebug("spares", "spare VM " + id + " holds " + snapshot);
}

void SandboxController::offerSpare(const std::string& shape, const std::string& id,
                                   const std::string& snapshot) {
    {
        std::lock_guard lock(sparesMutex_);
        if (!sparesStopping_) {
            spares_[shape].push_back(id);
            if (!snapshot.empty())
                spareLoaded_[id] = snapshot;
            else
                logDebug("spares", "spare VM " + id + " ready for " + shape);
            return;
        }
    }
    teardown(id);
}

void SandboxController::trimSpares(bool waitForStart) {
    auto wanted = spareShapes();
    std::set<std::string> readySnapshots;
    for (const auto& s : snapshots_.list(TenantScope::all()))
        if (s.state == SnapshotState::ready) readySnapshots.insert(s.id);
    auto gone = [&](const std::string& snapshot) {
        return !snapshot.empty() && !readySnapshots.count(snapshot);
    };
    std::vector<std::string> drop, replace;
    {
        std::unique_lock lock(sparesMutex_);
        std::erase_if(spareRequests_, [&](const SpareRequest& r) {
            return !wanted.count(r.shape) || gone(r.snapshot);
        });
        // A delete leaves no VM behind, not even one still starting, nor
        // the memory of a deleted snapshot in a spare: wait for the worker
        // (then the spare is in spares_ and goes below, or is gone already).
        if (waitForStart)
            sparesCv_.wait_for(lock, std::chrono::seconds(60), [&] {
                return (!spareStarting_ || wanted.count(*spareStarting_)) &&
                       (!spareLoading_ || !gone(*spareLoading_));
            });
        for (auto it = spares_.begin(); it != spares_.end();) {
            auto& ids = it->second;
            for (auto id = ids.begin(); id != ids.end();) {
                auto loaded = spareLoaded_.find(*id);
                if (wanted.count(it->first) &&
                    (loaded == spareLoaded_.end() || !gone(loaded->second))) {
                    ++id;
                    continue;
                }
                if (loaded != spareLoaded_.end()) {
                    spareLoaded_.erase(loaded);
                    if (wanted.count(it->first)) replace.push_back(it->first);
                }
                drop.push_back(*id);
                id = ids.erase(id);
            }
            it = ids.empty() ? spares_.erase(it) : std::next(it);
        }
    }
    for (const auto& id : drop) {
        try {
            teardown(id);
        } catch (const std::exception& e) {
            logError("spares", "cannot remove spare " + id + ": " + e.what());
        }
    }
    // A shape still in use keeps its spare, without the deleted state.
    for (const auto& shape : replace) wantSpare(shape);
}

void SandboxController::shutdown() {
    {
        std::lock_guard lock(sparesMutex_);
        sparesStopping_ = true;
    }
    sparesCv_.notify_all();
    if (spareThread_.joinable()) spareThread_.join();
    std::vector<std::string> drop;
    {
        std::lock_guard lock(sparesMutex_);
        for (auto& [shape, ids] : spares_) drop.insert(drop.end(), ids.begin(), ids.end());
        spares_.clear();
        spareLoaded_.clear();
    }
    for (const auto& id : drop) {
        try {
            teardown(id);
        } catch (const std::exception& e) {
            logError("spares", "cannot remove spare " + id + ": " + e.what());
        }
    }
}

}  // namespace airlock

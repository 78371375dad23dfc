// Spare VMs: for each clone shape in use, QEMU started ahead of time and
// paused waiting for a migration stream. libvirt's own start-up is about a
// second here under TCG, more than loading the state; a spare takes it off
// the clone path. A shape is in use while a ready snapshot of it exists or a
// live sandbox has it: a fork usually follows its snapshot at once, sooner
// than a spare could start. Only disk-less shapes: a disk is opened when QEMU
// starts, and its backing layer differs per snapshot.
#include <algorithm>
#include <filesystem>
#include <map>

#include "controller/SandboxController.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"

namespace airlock {

std::string SandboxController::shapeOf(const std::string& templateName, const std::string& digest,
                                       unsigned vcpus, unsigned memoryMib) {
    return templateName + "|" + digest + "|" + std::to_string(vcpus) + "|" +
           std::to_string(memoryMib);
}

void SandboxController::wantSpare(const std::string& shape, std::chrono::milliseconds delay) {
    if (config_.sparesPerShape == 0) return;
    {
        std::lock_guard lock(sparesMutex_);
        if (sparesStopping_) return;
        spareRequests_.push_back({shape, std::chrono::steady_clock::now() + delay});
    }
    sparesCv_.notify_all();  // the worker, not a clone waiting for a spare
}

std::optional<std::string> SandboxController::takeSpare(const std::string& shape) {
    // A spare already on its way (asked for by the snapshot just taken, or by
    // the previous clone) is ready sooner than a VM started now, which would
    // also compete with it for the cores: wait for it, a bounded time.
    constexpr auto kSpareWait = std::chrono::seconds(3);
    std::unique_lock lock(sparesMutex_);
    bool asked = false;
    for (auto& request : spareRequests_)
        if (request.shape == shape) {
            request.due = std::min(request.due, std::chrono::steady_clock::now());  // wanted now
            asked = true;
        }
    if (asked) sparesCv_.notify_all();
    auto ready = [&] {
        auto it = spares_.find(shape);
        return it != spares_.end() && !it->second.empty();
    };
    auto coming = [&] {
        return spareStarting_ == shape ||
               std::any_of(spareRequests_.begin(), spareRequests_.end(),
                           [&](const SpareRequest& r) { return r.shape == shape; });
    };
    sparesCv_.wait_for(lock, kSpareWait, [&] { return sparesStopping_ || ready() || !coming(); });
    if (sparesStopping_ || !ready()) return std::nullopt;
    auto& ids = spares_[shape];
    std::string id = ids.front();
    ids.erase(ids.begin());
    return id;
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
        std::string shape;
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
                spareRequests_.erase(next);
                if (spares_[shape].size() >= config_.sparesPerShape) {
                    sparesCv_.notify_all();  // a clone may wait on this request
                    continue;
                }
                spareStarting_ = shape;
                break;
            }
        }
        try {
            startSpare(shape);
        } catch (const std::exception& e) {
            logWarn("spares", "cannot start a spare VM for " + shape + ": " + e.what());
        }
        {
            std::lock_guard lock(sparesMutex_);
            spareStarting_.reset();
        }
        sparesCv_.notify_all();  // ready or not: clones waiting for it go on
    }
}

std::map<std::string, SandboxController::SpareShape> SandboxController::spareShapes() {
    std::map<std::string, SpareShape> wanted;
    for (const auto& s : snapshots_.list(TenantScope::all()))
        if (s.state == SnapshotState::ready && !s.hasDisk)
            wanted.emplace(shapeOf(s.templateName, s.templateDigest, s.vcpus, s.memoryMib),
                           SpareShape{s.templateName, s.templateDigest, s.vcpus, s.memoryMib});
    for (const auto& r : store_.list(TenantScope::all())) {
        if (r.tenant == kSpareTenant || !r.disk.empty()) continue;
        if (r.state != SandboxState::running && r.state != SandboxState::paused) continue;
        auto tmpl = templates_.find(r.templateName);
        if (!tmpl || !tmpl->diskPath.empty()) continue;
        wanted.emplace(shapeOf(tmpl->name, tmpl->digest, r.vcpus, r.memoryMib),
                       SpareShape{tmpl->name, tmpl->digest, r.vcpus, r.memoryMib});
    }
    return wanted;
}

void SandboxController::startSpare(const std::string& shape) {
    auto wanted = spareShapes();
    auto it = wanted.find(shape);
    if (it == wanted.end()) return;
    const SpareShape& want = it->second;
    auto tmpl = templates_.find(want.templateName);
    if (!tmpl || tmpl->digest != want.digest || !tmpl->diskPath.empty()) return;
    CreateSandboxRequest request;
    request.templateName = tmpl->name;
    request.vcpus = want.vcpus;
    request.memoryMib = want.memoryMib;
    request.timeoutS = 0;
    SandboxRecord r = newRecord(kSpareTenant, request, *tmpl);
    // A spare stays in state creating: recover() removes it after a crash.
    store_.insert(r);
    try {
        prepareSandboxDir(r);
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
    bool keep = false;
    {
        std::lock_guard lock(sparesMutex_);
        if (!sparesStopping_) {
            spares_[shape].push_back(r.id);
            keep = true;
        }
    }
    if (!keep) {
        teardown(r.id);
        return;
    }
    logDebug("spares", "spare VM " + r.id + " ready for " + shape);
    trimSpares(false);  // its shape may have gone meanwhile
}

void SandboxController::trimSpares(bool waitForStart) {
    auto wanted = spareShapes();
    std::vector<std::string> drop;
    {
        std::unique_lock lock(sparesMutex_);
        std::erase_if(spareRequests_,
                      [&](const SpareRequest& r) { return !wanted.count(r.shape); });
        // A delete leaves no VM behind, not even one still starting: wait
        // for it (then it is in spares_ and goes below, or is gone already).
        if (waitForStart)
            sparesCv_.wait_for(lock, std::chrono::seconds(60),
                               [&] { return !spareStarting_ || wanted.count(*spareStarting_); });
        for (auto it = spares_.begin(); it != spares_.end();) {
            if (wanted.count(it->first)) {
                ++it;
                continue;
            }
            drop.insert(drop.end(), it->second.begin(), it->second.end());
            it = spares_.erase(it);
        }
    }
    for (const auto& id : drop) {
        try {
            teardown(id);
        } catch (const std::exception& e) {
            logError("spares", "cannot remove spare " + id + ": " + e.what());
        }
    }
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

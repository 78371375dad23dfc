// Spare VMs: for each clone shape in use, QEMU started ahead of time and
// paused waiting for a migration stream. libvirt's own start-up (process
// set-up plus ~400 QMP round trips verifying the guest CPU) is about half a
// second here, more than loading the state; a spare takes it off the clone
// path. Only disk-less shapes: a disk is opened when QEMU starts, and its
// backing layer differs per snapshot.
#include <filesystem>
#include <set>

#include "controller/SandboxController.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"

namespace airlock {

std::string SandboxController::shapeOf(const std::string& templateName, const std::string& digest, unsigned vcpus,
                                       unsigned memoryMib) {
    return templateName + "|" + digest + "|" + std::to_string(vcpus) + "|" + std::to_string(memoryMib);
}

void SandboxController::wantSpare(const std::string& shape) {
    if (config_.sparesPerShape == 0) return;
    {
        std::lock_guard lock(sparesMutex_);
        if (sparesStopping_) return;
        spareRequests_.push_back(shape);
    }
    sparesCv_.notify_one();
}

std::optional<std::string> SandboxController::takeSpare(const std::string& shape) {
    std::lock_guard lock(sparesMutex_);
    auto it = spares_.find(shape);
    if (it == spares_.end() || it->second.empty()) return std::nullopt;
    std::string id = it->second.front();
    it->second.erase(it->second.begin());
    return id;
}

std::size_t SandboxController::spareCount() {
    std::lock_guard lock(sparesMutex_);
    std::size_t n = 0;
    for (const auto& [shape, ids] : spares_) n += ids.size();
    return n;
}

void SandboxController::spareWorker() {
    while (true) {
        std::string shape;
        {
            std::unique_lock lock(sparesMutex_);
            sparesCv_.wait(lock, [&] { return sparesStopping_ || !spareRequests_.empty(); });
            if (sparesStopping_) return;
            shape = spareRequests_.front();
            spareRequests_.pop_front();
            if (spares_[shape].size() >= config_.sparesPerShape) continue;
        }
        try {
            startSpare(shape);
        } catch (const std::exception& e) {
            logWarn("spares", "cannot start a spare VM for " + shape + ": " + e.what());
        }
    }
}

void SandboxController::startSpare(const std::string& shape) {
    // Only while a ready snapshot of this shape exists.
    std::optional<SnapshotRecord> source;
    for (auto& s : snapshots_.list(TenantScope::all()))
        if (s.state == SnapshotState::ready && !s.hasDisk &&
            shapeOf(s.templateName, s.templateDigest, s.vcpus, s.memoryMib) == shape)
            source = std::move(s);
    if (!source) return;
    auto tmpl = templates_.find(source->templateName);
    if (!tmpl || tmpl->digest != source->templateDigest || !tmpl->diskPath.empty()) return;
    CreateSandboxRequest request;
    request.templateName = tmpl->name;
    request.vcpus = source->vcpus;
    request.memoryMib = source->memoryMib;
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
    trimSpares();  // the snapshot may have gone meanwhile
}

void SandboxController::trimSpares() {
    std::set<std::string> wanted;
    for (const auto& s : snapshots_.list(TenantScope::all()))
        if (s.state == SnapshotState::ready && !s.hasDisk)
            wanted.insert(shapeOf(s.templateName, s.templateDigest, s.vcpus, s.memoryMib));
    std::vector<std::string> drop;
    {
        std::lock_guard lock(sparesMutex_);
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

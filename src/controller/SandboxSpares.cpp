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
#include <map>
#include <set>

#include "controller/DiskLayers.hpp"
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

std::string SandboxController::spareShapeOf(const SnapshotRecord& s) {
    std::string shape = shapeOf(s.templateName, s.templateDigest, s.vcpus, s.memoryMib);
    return s.hasDisk ? shape + "|" + s.id : shape;
}

std::map<std::string, SandboxController::SpareShape> SandboxController::spareShapes() {
    std::map<std::string, SpareShape> wanted;
    std::map<std::string, const SnapshotRecord*> latestWithDisk;  // by template shape
    auto snapshots = snapshots_.list(TenantScope::all());
    for (const auto& s : snapshots) {
        // A template build's cached layers are for the builder alone: no spare.
        if (s.state != SnapshotState::ready || s.kind == "layer") continue;
        if (!s.hasDisk) {
            wanted.emplace(spareShapeOf(s),
                           SpareShape{s.templateName, s.templateDigest, s.vcpus, s.memoryMib, ""});
            continue;
        }
        auto& latest =
            latestWithDisk[shapeOf(s.templateName, s.templateDigest, s.vcpus, s.memoryMib)];
        if (!latest || latest->createdAt < s.createdAt ||
            (latest->createdAt == s.createdAt && latest->id < s.id))
            latest = &s;
    }
    for (const auto& [shape, s] : latestWithDisk)
        wanted.emplace(spareShapeOf(*s), SpareShape{s->templateName, s->templateDigest, s->vcpus,
                                                    s->memoryMib, s->id});
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
    if (snap) request.diskGib = snapshotLibrary_.cloneDiskGib(*snap, *tmpl);
    SandboxRecord r = newRecord(kSpareTenant, request, *tmpl);
    // Its disk reads the snapshot's layers: the GC keeps them while it lives.
    if (snap) r.layers = snap->layers;
    // A spare stays in state creating: recover() removes it after a crash.
    store_.insert(r);
    try {
        prepareSandboxDir(r);
        if (snap)
            createOverlay(stagingDir(), sandboxDir(r.id), r.disk, snapshotLibrary_.layerPath(*snap),
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

void SandboxController::loadSpare(const std::string& id, const std::string& snapshot) {
    try {
        auto snap = snapshots_.find(snapshot);
        if (!snap || snap->state != SnapshotState::ready)
            throw Error(ErrorCode::conflict, "snapshot " + snapshot + " is gone");
        // The files are checked as for any restore: a damaged snapshot never
        // reaches a VM, not even a spare.
        snapshotLibrary_.verify(*snap);
        hypervisor_.loadState(domainName(id), snapshotLibrary_.statePath(*snap), sandboxDir(id));
    } catch (...) {
        try {
            teardown(id);  // a QEMU whose load failed takes no other state
        } catch (...) {
        }
        throw;
    }
}

// The pool's view of the controller: spares are sandboxes of tenant _spare.
class SandboxController::SpareVms : public SparePool::Vms {
  public:
    explicit SpareVms(SandboxController& c) : c_(c) {}
    std::optional<std::string> boot(const std::string& shape) override {
        return c_.bootSpare(shape);
    }
    void load(const std::string& spare, const std::string& snapshot) override {
        c_.loadSpare(spare, snapshot);
    }
    bool snapshotReady(const std::string& snapshot) override {
        auto s = c_.snapshots_.find(snapshot);
        return s && s->state == SnapshotState::ready;
    }
    void destroy(const std::string& spare) override { c_.teardown(spare); }
    InUse inUse() override {
        InUse used;
        for (const auto& [shape, want] : c_.spareShapes()) used.shapes.insert(shape);
        for (const auto& s : c_.snapshots_.list(TenantScope::all()))
            if (s.state == SnapshotState::ready) used.snapshots.insert(s.id);
        return used;
    }

  private:
    SandboxController& c_;
};

void SandboxController::startSpares() {
    spareVms_ = std::make_shared<SpareVms>(*this);
    // A clone waits this long for a spare already on its way.
    spares_ =
        std::make_unique<SparePool>(*spareVms_, config_.sparesPerShape, std::chrono::seconds(5));
}

void SandboxController::shutdown() { spares_->stop(); }

}  // namespace airlock

#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "controller/TemplateCatalog.hpp"
#include "controller/VerifiedFiles.hpp"
#include "store/SandboxStore.hpp"
#include "store/SnapshotStore.hpp"
#include "store/WorkspaceStore.hpp"

namespace airlock {

// A template build's snapshots (SandboxSnapshots::buildSnapshot): never a tenant's to list or touch.
bool isBuildKind(const std::string& kind);

// Snapshots as files and records, apart from the VMs they came from and go
// into: where a snapshot's memory state and frozen disk layer live, the
// manifest that vouches for them (written when the snapshot is sealed,
// checked before every restore), what a tenant may see and delete, and
// which deleted snapshots nothing reads any more (their files go with the
// last reader). Taking a snapshot and restoring one (the VM work) stay with
// the controller. Thread-safe: collection runs under its own lock; the
// rest is one store call at a time.
class SnapshotLibrary {
  public:
    static constexpr const char* kMemoryFile = "memory.state";
    static constexpr const char* kLayerFile = "disk.qcow2";
    static constexpr const char* kManifestFile = "manifest.json";

    SnapshotLibrary(std::string dataDir, SnapshotStore& snapshots, SandboxStore& sandboxes,
                    WorkspaceStore* workspaces);

    std::string dirOf(const SnapshotRecord& s) const;
    std::string statePath(const SnapshotRecord& s) const;  // its memory state
    std::string layerPath(const SnapshotRecord& s) const;  // its frozen disk layer

    // A just-taken snapshot's files: read-only, hashed and listed in its
    // manifest; the record becomes ready. Returns its size in bytes.
    std::int64_t seal(const SnapshotRecord& s);
    // A snapshot that will never be ready (its taking failed, or a crash
    // interrupted it). A sandbox whose disk already reads its frozen layer
    // (`layerRead`) keeps that layer: the record is hidden, the memory state
    // goes, and collect() removes the rest with its last reader. Otherwise
    // its files and record go at once.
    void abandon(const SnapshotRecord& s, bool layerRead);

    // A tenant's snapshot (deleted ones and others' are not found).
    SnapshotRecord get(const std::string& tenant, const std::string& id);
    // A scope's snapshots: never deleted or internal (warm) ones.
    std::vector<SnapshotRecord> list(const TenantScope& scope);
    std::vector<SnapshotRecord> list(const std::string& tenant) {
        return list(TenantScope::only(tenant));
    }
    // Hidden at once (Error(conflict) while still being taken); its disk
    // layer stays while a clone or a later snapshot still reads it.
    void remove(const std::string& tenant, const std::string& id);
    // A build snapshot (a cached layer, a template's), hidden like remove();
    // nothing when it is not one or is gone.
    void removeBuildSnapshot(const std::string& id);
    // Removes deleted snapshots whose layers nothing reads any more.
    void collect();
    // At start-up: abandons interrupted snapshots, collects, and removes
    // snapshot directories no record owns.
    void recover();

    // Every layer of a snapshot's chain and its memory state are what their
    // manifests recorded (hashed again only when a file changed since the
    // last check); Error(conflict) when one is not, Error(internal) when a
    // manifest or a layer is missing.
    void verify(const SnapshotRecord& snap);
    // The disk_gib of a clone of a disk-backed snapshot (its frozen layer's
    // size; the template's when the layer cannot be read: verify() says why).
    unsigned cloneDiskGib(const SnapshotRecord& snap, const TemplateInfo& tmpl);

    // A template's ready snapshot for its current build, if one exists.
    std::optional<SnapshotRecord> warmFor(const TemplateInfo& tmpl, const std::string& warmTenant);
    // Hides the warm snapshots of a template's older builds (never usable again).
    void retireOldWarm(const TemplateInfo& tmpl, const std::string& warmTenant);

  private:
    void hide(const SnapshotRecord& s);
    // Removes a snapshot's files and record now.
    void discard(const SnapshotRecord& s);

    std::string dataDir_;
    SnapshotStore& snapshots_;
    SandboxStore& sandboxes_;
    WorkspaceStore* workspaces_;
    VerifiedFiles verified_;
    std::mutex collectMutex_;  // one collection at a time
};

}  // namespace airlock

#pragma once
#include <string>

#include "store/SnapshotStore.hpp"

namespace airlock {

// Taking and removing a tenant's snapshots (the library lists and finds
// them: SnapshotLibrary).
class SandboxSnapshots {
  public:
    virtual ~SandboxSnapshots() = default;
    // Memory + device state, and the disk overlay frozen as a read-only
    // layer; a running sandbox is paused for the capture and goes on after.
    // A name (alias and tag) is the tenant's own label: Error(bad_request)
    // when either is malformed.
    virtual SnapshotRecord snapshot(const std::string& tenant, const std::string& sandboxId,
                                    const SnapshotName& name) = 0;
    SnapshotRecord snapshot(const std::string& tenant, const std::string& sandboxId) {
        return snapshot(tenant, sandboxId, SnapshotName{});
    }
    // A template build's snapshot: kind "layer" (a cached step, no spares
    // made for it) or "template" (what the template's sandboxes clone).
    // Neither is listed, counted against the snapshot quota or reachable
    // through the snapshot routes.
    virtual SnapshotRecord buildSnapshot(const std::string& tenant, const std::string& sandboxId,
                                         const std::string& kind) = 0;
    // A build snapshot hidden like deleteSnapshot (nothing when it is not
    // one or is gone); spares kept for its clones go.
    virtual void deleteBuildSnapshot(const std::string& snapshotId) = 0;
    // Hidden at once; spares kept for its clones go.
    virtual void deleteSnapshot(const std::string& tenant, const std::string& snapshotId) = 0;
};

}  // namespace airlock

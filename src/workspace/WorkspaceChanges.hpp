#pragma once
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "controller/WorkspaceSandboxes.hpp"
#include "workspace/GitMirrors.hpp"
#include "workspace/WorkingTree.hpp"
#include "workspace/WorkspaceConfig.hpp"
#include "workspace/WorkspaceEvidence.hpp"
#include "workspace/WorkspaceGuest.hpp"
#include "workspace/WorkspaceRecords.hpp"
#include "workspace/WorkspaceResults.hpp"

namespace airlock::workspace {

// A workspace's changes, computed on the host from the files the guest
// sends back (nothing the agent does to its own .git changes them): its
// info, its diff against the base (recorded as looked at), a commit of it
// on the task branch, and the view an evidence bundle records.
class WorkspaceChanges {
  public:
    WorkspaceChanges(const WorkspaceConfig& config, WorkspaceSandboxes& sandboxes,
                     GitMirrors& mirrors, WorkspaceRecords& records, const WorkspaceGuest& guest)
        : config_(config),
          sandboxes_(sandboxes),
          mirrors_(mirrors),
          records_(records),
          guest_(guest) {}

    WorkspaceInfo info(const std::string& tenant, const std::string& id);
    std::string diffPatch(const std::string& tenant, const std::string& id);
    WorkspaceDiff diff(const std::string& tenant, const std::string& id);
    // The working tree committed on the task branch (its parent: the last
    // such commit, else the base). Error(conflict) when nothing changed or
    // changes lie outside an enforced write scope; pending pushes end
    // superseded.
    WorkspaceCommit commit(const std::string& tenant, const std::string& id,
                           const std::string& message, const std::string& authorName,
                           const std::string& authorEmail);
    // nullopt when the sandbox has no workspace; throws when it is not running.
    std::optional<WorkspaceEvidence> evidenceView(
        const std::string& tenant, const std::string& id,
        const std::function<bool(const std::string&)>& wanted);

  private:
    struct Snapshot {
        std::string tree;
        TreeDiff diff;
        Scan scan;
    };
    // The guest's working tree as a git tree in the tenant's store, and its
    // diff against the base. Caller holds the sandbox's workspace lock.
    Snapshot snapshot(const std::string& tenant, const std::string& id, const WorkspaceRecord& r);
    Snapshot diffed(const std::string& tenant, const std::string& id, WorkspaceRecord& r);
    // Blob ids each sandbox's guest sent (read back and hashed here): what a
    // claim of that sandbox may name besides its base (in memory: after a
    // restart its files are read back again).
    std::set<std::string> guestBlobs(const std::string& id);
    void rememberGuestBlobs(const std::string& id, const std::set<std::string>& ids);

    const WorkspaceConfig& config_;
    WorkspaceSandboxes& sandboxes_;
    GitMirrors& mirrors_;
    WorkspaceRecords& records_;
    const WorkspaceGuest& guest_;
    std::mutex guestBlobsMutex_;
    std::map<std::string, std::set<std::string>> guestBlobs_;
};

}  // namespace airlock::workspace

#pragma once
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "controller/WorkspaceSandboxes.hpp"
#include "core/KeyedMutexes.hpp"
#include "store/WorkspaceStore.hpp"
#include "workspace/CheckoutArchive.hpp"
#include "workspace/GitMirrors.hpp"

namespace airlock::workspace {

// What the host keeps of one sandbox's workspace: where it came from (remote,
// ref, base commit, submodules), the task branch and its host-made head, the
// write scope, and what its owner should know.
struct WorkspaceRecord {
    std::string repo, baseRef, baseCommit, branch, path, credential, head;
    std::vector<std::string> writeScope;
    bool enforceScope = false;
    std::vector<SubmoduleCheckout> submodules;  // mirrorPath filled when loaded
    // Submodules not checked out (outside the credential's scope and not
    // readable without it): their gitlinks stay as the base has them.
    std::vector<SubmoduleCheckout> skipped;
    std::vector<std::string> warnings;

    nlohmann::json toJson() const;
    static WorkspaceRecord fromJson(const nlohmann::json& j);
    // The skipped submodules as the audit records them.
    nlohmann::json skippedJson() const;
};

// What an audit record needs of a sandbox: its id and tenant.
SandboxRecord sandboxRef(const std::string& id, const std::string& tenant);

// The workspace records of every sandbox, their one-at-a-time lock, and the
// write scope the files API checks against them.
class WorkspaceRecords {
  public:
    WorkspaceRecords(WorkspaceStore& store, WorkspaceSandboxes& sandboxes, GitMirrors& mirrors)
        : store_(store), sandboxes_(sandboxes), mirrors_(mirrors) {}

    // The caller's workspace: Error(not_found) for another tenant's sandbox
    // or one without a workspace; its submodules' mirrors filled in.
    WorkspaceRecord load(const std::string& tenant, const std::string& id);
    // The stored record (none: no workspace); Error(internal) when damaged.
    std::optional<WorkspaceRecord> stored(const std::string& id);
    bool has(const std::string& id) { return store_.find(id).has_value(); }
    void save(const std::string& id, const std::string& tenant, const WorkspaceRecord& r);
    // Every remote any record (a sandbox's or a snapshot's) names.
    std::set<std::string> urlsInUse();

    // One call at a time changes or reads a sandbox's workspace.
    struct Held {
        std::shared_ptr<std::mutex> mutex;
        std::unique_lock<std::mutex> lock;
    };
    Held hold(const std::string& id);
    // The caller's sandbox's (Error(not_found) first, so no one waits on
    // another tenant's): read the record after, under it.
    Held holdOwned(const std::string& tenant, const std::string& id);

    // A write through the files API to `path` (as the guest resolves it,
    // lexically): Error(forbidden) inside the repository and outside its
    // enforced write scope; a damaged record refuses (Error(internal)),
    // the scope is never skipped because it could not be read.
    void checkWrite(const SandboxRecord& sandbox, const std::string& path);

  private:
    WorkspaceStore& store_;
    WorkspaceSandboxes& sandboxes_;
    GitMirrors& mirrors_;
    KeyedMutexes locks_;
};

}  // namespace airlock::workspace

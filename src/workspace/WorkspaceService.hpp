#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "controller/WorkspaceSandboxes.hpp"
#include "workspace/WorkspaceEvidence.hpp"
#include "core/KeyedMutexes.hpp"
#include "core/SecretCipher.hpp"
#include "egress/AddressPolicy.hpp"
#include "store/CredentialStore.hpp"
#include "store/WorkspaceStore.hpp"
#include "workspace/CheckoutArchive.hpp"
#include "workspace/GitRemoteAccess.hpp"
#include "workspace/GitMirrors.hpp"
#include "workspace/WorkingTree.hpp"
#include "workspace/WorkspaceConfig.hpp"
#include "workspace/WorkspaceCredentials.hpp"
#include "workspace/WorkspaceResults.hpp"

namespace airlock::workspace {

// Repository workspaces: mirrors and checkouts on the host (libgit2), the
// guest gets files and a clean .git, never a credential; the diff, commit
// and push are computed on the host from the files the agent streams back,
// so nothing the agent does to its own .git changes them. A push is always
// a publish approval; the push itself runs on this service's worker.
class WorkspaceService : public WorkspaceEvidenceSource {
  public:
    WorkspaceService(WorkspaceConfig config, WorkspaceSandboxes& sandboxes,
                     CredentialStore& credentials, WorkspaceStore& workspaces);
    ~WorkspaceService();
    WorkspaceService(const WorkspaceService&) = delete;
    WorkspaceService& operator=(const WorkspaceService&) = delete;

    // The tenants' git credentials, which fetches and pushes open here.
    WorkspaceCredentials& credentials() { return credentials_; }

    // A sandbox with request.workspace set: the repository is fetched and
    // resolved first (bad credential, ref or branch: nothing boots), then
    // the sandbox is created and the checkout sent in; a failure there
    // destroys the sandbox.
    SandboxRecord createSandbox(const std::string& tenant, const CreateSandboxRequest& request);

    WorkspaceInfo info(const std::string& tenant, const std::string& id);
    // The diff against the base, recorded as looked at: as a patch, or whole.
    std::string diffPatch(const std::string& tenant, const std::string& id);
    WorkspaceDiff diff(const std::string& tenant, const std::string& id);
    WorkspaceCommit commit(const std::string& tenant, const std::string& id,
                           const std::string& message, const std::string& authorName,
                           const std::string& authorEmail);
    // Parks the push of `commit` (the head) as a publish approval.
    PushStatus requestPush(const std::string& tenant, const std::string& id,
                           const std::string& commit);
    PushStatus pushState(const std::string& tenant, const std::string& id,
                         const std::string& pushId);
    // Back at the base commit: the working tree, its .git and the host's head
    // (nothing is left to push); pending push approvals end superseded.
    void reset(const std::string& tenant, const std::string& id, bool cleanIgnored);
    // The patch of a push approval's commit against its base (git's format),
    // from the approval's own parked request (Error(conflict) if it is not
    // the one the approval bound).
    std::string pushPatch(const GatedExec& approval);

    // What an evidence bundle records of the workspace: where it started
    // (repo without credentials, ref, base commit and tree, branch, scope),
    // the working tree now (final tree, patch, files) and, for the paths
    // `wanted` picks among the changed ones plus .gitattributes, their
    // content before and after ("" when absent on that side).
    using EvidenceView = WorkspaceEvidence;
    bool hasWorkspace(const std::string& id) override {
        return workspaces_.find(id).has_value();
    }
    // The latest evidence bundle of a sandbox whose final tree is `tree`, in
    // short ({"id","summary"} or null): a push approval shows it to the
    // approver, never one sealed for another tree.
    using EvidenceSummary =
        std::function<nlohmann::json(const std::string& sandboxId, const std::string& tree)>;
    void setEvidenceSummary(EvidenceSummary source) { evidenceSummary_ = std::move(source); }
    // nullopt when the sandbox has no workspace; throws when it is not running.
    // Removes the mirrors no workspace record names that were last used
    // longer than the retention time ago; returns how many went.
    std::size_t pruneMirrors();

    std::optional<EvidenceView> evidenceView(
        const std::string& tenant, const std::string& id,
        const std::function<bool(const std::string&)>& wanted) override;

  private:
    struct Record;
    struct Snapshot;
    Record load(const std::string& tenant, const std::string& id);
    // The stored record of a sandbox's workspace (none: it has no workspace);
    // Error(internal) when it cannot be read.
    std::optional<Record> stored(const std::string& id);
    void save(const std::string& id, const std::string& tenant, const Record& r);
    Snapshot snapshot(const std::string& tenant, const std::string& id, const Record& r);
    Snapshot diffed(const std::string& tenant, const std::string& id, Record& r);
    void sendArchive(const std::string& tenant, const std::string& id, const std::string& path,
                     const std::function<void(CheckoutArchive&)>& fill);
    void populate(const std::string& tenant, const std::string& id, const Record& r, bool resetOnly,
                  const Scan* current);
    void checkWrite(const SandboxRecord& r, const std::string& path);
    void onPublishDecision(const GatedExec& g, bool approved);
    void runPush(GatedExec g);
    void pushWorker();

    WorkspaceConfig config_;
    EvidenceSummary evidenceSummary_;
    WorkspaceSandboxes& sandboxes_;
    WorkspaceCredentials credentials_;
    WorkspaceStore& workspaces_;
    GitMirrors mirrors_;
    KeyedMutexes sandboxLocks_;  // one sandbox's workspace at a time
    std::mutex queueMutex_;
    std::condition_variable queueCv_;
    std::deque<GatedExec> pushQueue_;
    bool stopping_ = false;
    std::thread worker_;
    // Blob ids each sandbox's guest sent (read back and hashed here): what a
    // claim of that sandbox may name besides its base (in memory: after a
    // restart its files are read back again).
    std::set<std::string> guestBlobs(const std::string& id);
    void rememberGuestBlobs(const std::string& id, const std::set<std::string>& ids);
    std::mutex guestBlobsMutex_;
    std::map<std::string, std::set<std::string>> guestBlobs_;
};

}  // namespace airlock::workspace

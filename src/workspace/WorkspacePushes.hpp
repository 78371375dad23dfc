#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "controller/WorkspaceSandboxes.hpp"
#include "workspace/GitMirrors.hpp"
#include "workspace/WorkspaceConfig.hpp"
#include "workspace/WorkspaceCredentials.hpp"
#include "workspace/WorkspaceEvidence.hpp"
#include "workspace/WorkspaceRecords.hpp"
#include "workspace/WorkspaceResults.hpp"

namespace airlock::workspace {

// Pushes of a workspace's task branch: always a publish approval, bound to
// the commit, its tree and the remote branch's value when asked (the
// lease); once approved, run on this class's one worker exactly as parked,
// with the tenant's credential on the host.
class WorkspacePushes {
  public:
    // The latest evidence bundle of a sandbox whose final tree is `tree`:
    // the approver sees it, never one sealed for another tree.
    using EvidenceSummary = std::function<std::optional<EvidenceBrief>(const std::string& sandboxId,
                                                                        const std::string& tree)>;

    // A push a restart interrupted is failed here (the agent may ask again).
    WorkspacePushes(const WorkspaceConfig& config, WorkspaceSandboxes& sandboxes,
                    WorkspaceCredentials& credentials, GitMirrors& mirrors,
                    WorkspaceRecords& records);
    // Pushes still queued end failed.
    ~WorkspacePushes();
    WorkspacePushes(const WorkspacePushes&) = delete;
    WorkspacePushes& operator=(const WorkspacePushes&) = delete;

    void setEvidenceSummary(EvidenceSummary source) { evidenceSummary_ = std::move(source); }
    // Parks the push of `commit` (the head) as a publish approval.
    PushStatus request(const std::string& tenant, const std::string& id,
                       const std::string& commit);
    PushStatus state(const std::string& tenant, const std::string& id, const std::string& pushId);
    // The patch of a push approval's commit against its base (git's format),
    // from the approval's own parked request (Error(conflict) if it is not
    // the one the approval bound).
    std::string patch(const GatedExec& approval);
    // A decided publish approval (the gates' hook): audited; approved ones
    // are queued for the worker.
    void decided(const GatedExec& g, bool approved);

  private:
    void work();
    void run(const GatedExec& g);

    const WorkspaceConfig& config_;
    WorkspaceSandboxes& sandboxes_;
    WorkspaceCredentials& credentials_;
    GitMirrors& mirrors_;
    WorkspaceRecords& records_;
    EvidenceSummary evidenceSummary_;
    std::mutex queueMutex_;
    std::condition_variable queueCv_;
    std::deque<GatedExec> queue_;
    bool stopping_ = false;
    std::thread worker_;
};

}  // namespace airlock::workspace

#pragma once
#include <functional>
#include <optional>
#include <string>

#include "controller/WorkspaceSandboxes.hpp"
#include "store/CredentialStore.hpp"
#include "store/WorkspaceStore.hpp"
#include "workspace/GitMirrors.hpp"
#include "workspace/WorkspaceChanges.hpp"
#include "workspace/WorkspaceCheckouts.hpp"
#include "workspace/WorkspaceConfig.hpp"
#include "workspace/WorkspaceCredentials.hpp"
#include "workspace/WorkspaceEvidence.hpp"
#include "workspace/WorkspaceGuest.hpp"
#include "workspace/WorkspaceMoves.hpp"
#include "workspace/WorkspacePushes.hpp"
#include "workspace/WorkspaceRecords.hpp"
#include "workspace/WorkspaceResults.hpp"

namespace airlock::workspace {

// Repository workspaces: mirrors and checkouts on the host (libgit2), the
// guest gets files and a clean .git, never a credential; the diff, commit
// and push are computed on the host from the files the agent streams back,
// so nothing the agent does to its own .git changes them. A push is always
// a publish approval. Each concern is a part of its own (credentials,
// mirrors, records, checkouts, changes, pushes); this class puts them
// together and hooks them into the sandboxes.
class WorkspaceService : public WorkspaceEvidenceSource {
  public:
    WorkspaceService(WorkspaceConfig config, WorkspaceSandboxes& sandboxes,
                     Credentials& credentials, WorkspaceStore& workspaces);
    ~WorkspaceService() override;
    WorkspaceService(const WorkspaceService&) = delete;
    WorkspaceService& operator=(const WorkspaceService&) = delete;

    // The tenants' git credentials, which fetches and pushes open here.
    WorkspaceCredentials& credentials() { return credentials_; }

    SandboxRecord createSandbox(const std::string& tenant, const CreateSandboxRequest& request) {
        return checkouts_.createSandbox(tenant, request);
    }
    WorkspaceInfo info(const std::string& tenant, const std::string& id) {
        return changes_.info(tenant, id);
    }
    // The diff against the base, recorded as looked at: as a patch, or whole.
    std::string diffPatch(const std::string& tenant, const std::string& id) {
        return changes_.diffPatch(tenant, id);
    }
    WorkspaceDiff diff(const std::string& tenant, const std::string& id) {
        return changes_.diff(tenant, id);
    }
    WorkspaceCommit commit(const std::string& tenant, const std::string& id,
                           const std::string& message, const std::string& authorName,
                           const std::string& authorEmail) {
        return changes_.commit(tenant, id, message, authorName, authorEmail);
    }
    PushStatus requestPush(const std::string& tenant, const std::string& id,
                           const std::string& commit) {
        return pushes_.request(tenant, id, commit);
    }
    PushStatus pushState(const std::string& tenant, const std::string& id,
                         const std::string& pushId) {
        return pushes_.state(tenant, id, pushId);
    }
    void reset(const std::string& tenant, const std::string& id, bool cleanIgnored) {
        checkouts_.reset(tenant, id, cleanIgnored);
    }
    std::string pushPatch(const GatedExec& approval) { return pushes_.patch(approval); }

    using EvidenceView = WorkspaceEvidence;
    using EvidenceSummary = WorkspacePushes::EvidenceSummary;
    void setEvidenceSummary(EvidenceSummary source) {
        pushes_.setEvidenceSummary(std::move(source));
    }
    // Removes the mirrors no workspace record names that were last used
    // longer than the retention time ago; returns how many went.
    std::size_t pruneMirrors() { return mirrors_.prune(records_.urlsInUse()); }

    bool hasWorkspace(const std::string& id) override { return records_.has(id); }
    std::optional<EvidenceView> evidenceView(
        const std::string& tenant, const std::string& id,
        const std::function<bool(const std::string&)>& wanted) override {
        return changes_.evidenceView(tenant, id, wanted);
    }

  private:
    WorkspaceConfig config_;
    WorkspaceSandboxes& sandboxes_;
    WorkspaceCredentials credentials_;
    GitMirrors mirrors_;
    WorkspaceRecords records_;
    WorkspaceGuest guest_;
    WorkspaceCheckouts checkouts_;
    WorkspaceChanges changes_;
    WorkspacePushes pushes_;
    WorkspaceMoves moves_;
};

}  // namespace airlock::workspace

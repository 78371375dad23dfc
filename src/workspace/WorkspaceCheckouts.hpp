#pragma once
#include <string>

#include "controller/WorkspaceSandboxes.hpp"
#include "workspace/GitMirrors.hpp"
#include "workspace/WorkspaceConfig.hpp"
#include "workspace/WorkspaceCredentials.hpp"
#include "workspace/WorkspaceGuest.hpp"
#include "workspace/WorkspaceRecords.hpp"

namespace airlock::workspace {

// A workspace's checkout: the repository (and its submodules) fetched and
// resolved on the host, the files and a clean .git sent into the guest, and
// the way back to the base commit. No credential reaches the guest.
class WorkspaceCheckouts {
  public:
    WorkspaceCheckouts(const WorkspaceConfig& config, WorkspaceSandboxes& sandboxes,
                       WorkspaceCredentials& credentials, GitMirrors& mirrors,
                       WorkspaceRecords& records, const WorkspaceGuest& guest)
        : config_(config),
          sandboxes_(sandboxes),
          credentials_(credentials),
          mirrors_(mirrors),
          records_(records),
          guest_(guest) {}

    // A sandbox with request.workspace set: the repository is fetched and
    // resolved first (bad credential, ref or branch: nothing boots), then
    // the sandbox is created and the checkout sent in; a failure there
    // destroys the sandbox.
    SandboxRecord createSandbox(const std::string& tenant, const CreateSandboxRequest& request);
    // Back at the base commit: the working tree, its .git and the host's head
    // (nothing is left to push); pending push approvals end superseded.
    void reset(const std::string& tenant, const std::string& id, bool cleanIgnored);

    // name -> (path, url) of a .gitmodules file ([submodule "name"] with
    // path and url; quoted values; no includes: libgit2's config reader
    // would follow include.path to the host's files).
    static std::map<std::string, std::pair<std::string, std::string>> parseGitmodules(
        std::string_view text);
    // A branch name git would take for a new task branch.
    static bool validBranch(const std::string& branch);

  private:
    // The record of a new workspace: its base commit and submodules, every
    // mirror fetched (Error(unprocessable) for a ref or commit not there).
    WorkspaceRecord resolve(const std::string& tenant, const WorkspaceSpec& spec);
    // Sends the base's files and a new .git; `current` (a reset): what the
    // guest has that the base has not is removed first.
    void populate(const std::string& tenant, const std::string& id, const WorkspaceRecord& r,
                  const Scan* current);

    const WorkspaceConfig& config_;
    WorkspaceSandboxes& sandboxes_;
    WorkspaceCredentials& credentials_;
    GitMirrors& mirrors_;
    WorkspaceRecords& records_;
    const WorkspaceGuest& guest_;
};

}  // namespace airlock::workspace

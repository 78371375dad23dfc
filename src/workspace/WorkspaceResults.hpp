#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "workspace/CheckoutArchive.hpp"
#include "workspace/WorkingTree.hpp"

namespace airlock::workspace {

// What the workspace service answers; the front doors render them.

// GET /v1/sandboxes/{id}/workspace
struct WorkspaceInfo {
    std::string repo, baseRef, baseCommit, branch, path, credential;
    std::string head;  // the last commit made on the host ("" : none yet)
    std::vector<std::string> writeScope;
    bool enforceScope = false;
    std::vector<SubmoduleCheckout> submodules;
    // Not checked out (outside the credential's scope): their gitlinks stay
    // as the base has them.
    std::vector<SubmoduleCheckout> skippedSubmodules;
    std::vector<std::string> warnings;
    // Files changed against the base; nullopt when the sandbox is not
    // running (only the count needs the guest).
    std::optional<std::size_t> changedFiles;
};

// GET /v1/sandboxes/{id}/workspace/diff?format=json
struct WorkspaceDiff {
    std::string baseCommit, tree;
    TreeDiff diff;
};

// POST /v1/sandboxes/{id}/workspace/commit
struct WorkspaceCommit {
    std::string commit, tree, parent, branch;
};

// POST /v1/sandboxes/{id}/workspace/push and GET .../pushes/{push}
struct PushStatus {
    std::string pushId, approvalId;
    std::string state;  // pending, approved, pushing, pushed, denied, failed, superseded...
    std::string repo, branch, commit;
    std::string lease;        // the remote branch's value the push is held to
    std::string requestedAt;  // these and the rest: GET only
    std::string decidedBy, decidedAt, decisionReason;
    std::string error;
};

}  // namespace airlock::workspace

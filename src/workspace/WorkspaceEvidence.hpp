#pragma once
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "workspace/WorkingTree.hpp"

namespace airlock {

// A repository workspace as a bundle shows it: what was cloned (repo
// without credentials, ref, base commit and tree, branch, scope), the
// working tree now (final tree, patch, files) and, for the paths the
// caller picked among the changed ones plus .gitattributes, their content
// before and after ("" when absent on that side).
struct WorkspaceEvidence {
    std::string repo, ref, baseCommit, baseTree, branch, path;
    std::vector<std::string> writeScope;
    bool enforceScope = false;
    std::optional<std::string> finalCommit;  // the host's last commit, when it holds finalTree
    std::string finalTree, patch;
    std::vector<workspace::ChangedFile> files;
    std::map<std::string, std::pair<std::string, std::string>> contents;
    std::string gitattributes;
};

// The latest evidence bundle sealed for exactly one workspace tree, in
// short: what a push approver is shown of the commit's tree.
struct EvidenceBrief {
    std::string id;
    std::string summaryJson;  // the bundle's summary, as its record keeps it
};

// What the evidence service reads of a sandbox's workspace (the workspace
// service implements it).
class WorkspaceEvidenceSource {
  public:
    virtual ~WorkspaceEvidenceSource() = default;
    virtual bool hasWorkspace(const std::string& sandboxId) = 0;
    // nullopt when the sandbox has no workspace; throws when it is not running.
    virtual std::optional<WorkspaceEvidence> evidenceView(
        const std::string& tenant, const std::string& id,
        const std::function<bool(const std::string&)>& wanted) = 0;
};

}  // namespace airlock

#pragma once
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "workspace/GitSupport.hpp"

namespace airlock::workspace {

// One file of the guest's working tree as the agent's scan reported it.
struct ScannedFile {
    std::string path;
    std::uint32_t mode = 0;  // 0100644, 0100755 or 0120000
    std::string id;          // the blob id the guest claims (a hint only)
    std::string linkTarget;  // links
};

struct Scan {
    std::vector<ScannedFile> files;
    std::vector<std::string> ignored;  // top-most ignored paths (directories end in "/")
};

// Reads the agent's workspace_scan output (protocol::WorkspaceManifest);
// throws Error(agent_error) on anything malformed (it comes from the guest).
Scan parseScan(const std::string& bytes);

// Builds, in `repo`, the tree a commit of the working tree would record:
// a blob the repository has (by the guest's claimed id) is taken as is,
// any other is read from the guest through `readFile` and hashed here, so
// the tree only ever names content the host holds. Gitlinks (submodules)
// keep their base values. Returns the tree id.
using FileReader = std::function<std::string(const std::string& path)>;
// Every file counts against maxBytes, claimed or read (a guest naming one
// big blob under many paths gets no further than one reading them all).
// `mayClaim`, when set, limits which held blobs a claim may name (the
// repository reads other repositories' objects through alternates: a claim
// outside the workspace's own objects is read back like an unknown one).
using ClaimFilter = std::function<bool(const git_oid&)>;
git_oid buildWorkingTree(git_repository* repo, const Scan& scan,
                         const std::map<std::string, git_oid>& gitlinks, const FileReader& readFile,
                         std::uint64_t maxBytes = 4ull << 30, const ClaimFilter& mayClaim = {});

// One file of a diff: added, modified, deleted, renamed (oldPath is the
// path before; the path itself when not renamed), typechange.
struct ChangedFile {
    std::string path, oldPath, status;
    std::size_t additions = 0, deletions = 0;
    bool binary = false;
    bool inScope = true;  // the write scope covers it (and its old path)
};
// {"path","old_path","status","additions","deletions","binary","in_scope"}
nlohmann::json changedFileJson(const ChangedFile& f);
nlohmann::json changedFilesJson(const std::vector<ChangedFile>& files);

struct TreeDiff {
    std::string patch;  // git's patch format: full index lines, binary patches, renames
    std::vector<ChangedFile> files;
    std::vector<std::string> outOfScope;
    std::size_t additions = 0, deletions = 0;
};

// base -> tree, renames found; a file is in scope when `scope` is empty or
// one of its globs matches its path (and its old path, for a rename).
// The patch stops at maxPatchBytes (Error(payload_too_large)).
TreeDiff diffTrees(git_repository* repo, const git_oid& base, const git_oid& tree,
                   const std::vector<std::string>& scope, std::size_t maxPatchBytes = 256u << 20);

bool inScope(const std::vector<std::string>& scope, const std::string& path);

// The entries (path -> mode, id) of a tree, recursively; gitlinks included.
struct TreeFile {
    std::uint32_t mode;
    git_oid id;
};
std::map<std::string, TreeFile> flattenTree(git_repository* repo, const git_oid& tree);

}  // namespace airlock::workspace

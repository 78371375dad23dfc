#pragma once
#include <string>

namespace airlock {

// The tree a patch gives when applied to a commit of a local repository,
// computed the way `git apply --index` + `git write-tree` would, without
// touching the repository: the objects it makes stay in memory. Throws
// Error(bad_request) when the commit is unknown or the patch does not apply.
std::string treeAfterPatch(const std::string& repositoryPath, const std::string& baseCommit,
                           const std::string& patch);

}  // namespace airlock

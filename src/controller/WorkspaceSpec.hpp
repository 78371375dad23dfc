#pragma once
#include <string>
#include <vector>

namespace airlock {

// "workspace" of POST /v1/sandboxes: a repository checked out on the host
// and sent into the sandbox.
struct WorkspaceSpec {
    std::string repo;
    std::string ref;     // a branch, tag or other revision ("main")...
    std::string commit;  // ...or exactly this commit (40 hex)
    std::string branch;  // the task branch made at that commit
    std::string path = "/workspace";
    std::string credential;  // a name from /v1/credentials ("" = none)
    bool submodules = true;
    std::vector<std::string> writeScope;  // globs; empty: the whole tree
    bool enforceScope = false;
};

}  // namespace airlock

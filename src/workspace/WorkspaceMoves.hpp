#pragma once
#include <string>

#include "workspace/GitMirrors.hpp"
#include "workspace/WorkspaceConfig.hpp"
#include "workspace/WorkspaceCredentials.hpp"
#include "workspace/WorkspaceRecords.hpp"

namespace airlock::workspace {

// A workspace moving with its sandbox to another node (a drain with move).
// What only this host holds, the commits it made on the task branch, goes
// as a git pack; the new node fetches the mirrors again with the tenant's
// credential (the fleet shares credentials) and checks that the base is
// still there. The guest's files travel on its disk.
class WorkspaceMoves {
  public:
    WorkspaceMoves(const WorkspaceConfig& config, WorkspaceCredentials& credentials,
                   GitMirrors& mirrors, WorkspaceRecords& records)
        : config_(config), credentials_(credentials), mirrors_(mirrors), records_(records) {}

    // Writes the host's commits since the base (the head and what it names
    // that the base does not) to `packPath` as a git pack; false, and no
    // file, when there is no host commit.
    bool packOut(const std::string& tenant, const std::string& id, const std::string& packPath);
    // Makes the workspace whole here from its record's JSON and the pack
    // ("" for none): mirrors fetched, the base checked, the pack's objects
    // stored, the head's ref and the record written. Error(unprocessable)
    // when the remote no longer has the base; Error(bad_request) for a
    // record or pack that is not what packOut wrote. Nothing is recorded on
    // failure.
    void arrive(const std::string& tenant, const std::string& id, const std::string& recordJson,
                const std::string& packPath);

  private:
    const WorkspaceConfig& config_;
    WorkspaceCredentials& credentials_;
    GitMirrors& mirrors_;
    WorkspaceRecords& records_;
};

}  // namespace airlock::workspace

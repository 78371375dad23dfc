#pragma once
#include <optional>
#include <string>
#include <vector>

#include "store/Database.hpp"

namespace airlock {

// The workspace of a sandbox (or of a snapshot, so its clones get it), as
// the JSON the workspace service keeps: remote, base, branch, scope, the
// head of the task branch.
class WorkspaceStore {
  public:
    explicit WorkspaceStore(Database& db);
    void put(const std::string& owner, const std::string& tenant, const std::string& json);
    std::optional<std::string> find(const std::string& owner);
    // A snapshot takes its sandbox's, a clone its snapshot's; no-op without one.
    void copy(const std::string& from, const std::string& to);
    void remove(const std::string& owner);
    // Every record's JSON (mirror retention keeps what any of them names).
    std::vector<std::string> all();

  private:
    Database& db_;
};

}  // namespace airlock

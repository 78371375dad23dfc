#pragma once
#include <optional>
#include <string>
#include <vector>

#include "fleet/KeyValueStore.hpp"

namespace airlock::fleet {

// Where a sandbox lives in the fleet: /airlock/sandboxes/<id> in etcd.
// Any node answers for any sandbox by reading this record and forwarding
// to the node it names; the node that owns the VM writes it.
struct SandboxPlacement {
    std::string id;
    std::string tenant;
    std::string node;        // the owner's node name
    std::int64_t epoch = 0;  // the owner's epoch when it placed the sandbox
    std::string placedWhy;   // how the node was chosen (display)

    std::string toJson() const;
    static SandboxPlacement fromJson(const std::string& id, const std::string& text);
};

class SandboxDirectory {
  public:
    static inline const std::string kPrefix = "/airlock/sandboxes/";
    explicit SandboxDirectory(KeyValueStore& store) : store_(store) {}
    // Writes the record (the owner, after its VM exists).
    void record(const SandboxPlacement& placement);
    void forget(const std::string& id);
    // Linearizable: a record another node wrote a moment ago is seen.
    std::optional<SandboxPlacement> find(const std::string& id);
    std::vector<SandboxPlacement> list();

  private:
    KeyValueStore& store_;
};

}  // namespace airlock::fleet

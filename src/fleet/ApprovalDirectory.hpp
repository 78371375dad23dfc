#pragma once
#include <optional>
#include <string>

#include "fleet/KeyValueStore.hpp"

namespace airlock::fleet {

// Where an approval lives: /airlock/approvals/<id> names its tenant, node
// and sandbox (its record stays on that node, with its sandbox's), and
// /airlock/sandbox-approvals/<sandbox>/<id> lets a sandbox's delete remove
// its approvals' entries. Any node answers for an approval by reading the
// first and forwarding to the node it names.
class ApprovalDirectory {
  public:
    static inline const std::string kPrefix = "/airlock/approvals/";
    static inline const std::string kBySandbox = "/airlock/sandbox-approvals/";
    struct Entry {
        std::string tenant, node, sandbox;
    };
    explicit ApprovalDirectory(KeyValueStore& store) : store_(store) {}
    void record(const std::string& approvalId, const Entry& entry);
    std::optional<Entry> find(const std::string& approvalId);
    // Every approval of a deleted sandbox.
    void forgetSandbox(const std::string& sandboxId);

  private:
    KeyValueStore& store_;
};

}  // namespace airlock::fleet

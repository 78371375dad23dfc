#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fleet/KeyValueStore.hpp"

namespace airlock::fleet {

// Where an object of a sandbox's (an approval, an evidence bundle) lives:
// /airlock/<kind>/<id> names its tenant, node and sandbox (the object stays
// on that node, with its sandbox's detail), and
// /airlock/sandbox-<kind>/<sandbox>/<id> lets the sandbox's end remove its
// objects' entries. Any node answers for the object by reading the first
// and forwarding to the node it names.
class ObjectDirectory {
  public:
    struct Entry {
        std::string tenant, node, sandbox;
    };
    // kind: a plain name, "approvals" or "evidence".
    ObjectDirectory(KeyValueStore& store, const std::string& kind)
        : store_(store),
          prefix_("/airlock/" + kind + "/"),
          bySandbox_("/airlock/sandbox-" + kind + "/") {}
    const std::string& prefix() const { return prefix_; }
    const std::string& bySandbox() const { return bySandbox_; }

    void record(const std::string& id, const Entry& entry);
    std::optional<Entry> find(const std::string& id);
    void forget(const std::string& id);
    // Every object of a sandbox.
    void forgetSandbox(const std::string& sandboxId);
    // Every object of a sandbox by id, wherever it was made.
    std::vector<std::pair<std::string, Entry>> ofSandbox(const std::string& sandboxId);

  private:
    KeyValueStore& store_;
    std::string prefix_, bySandbox_;
};

}  // namespace airlock::fleet

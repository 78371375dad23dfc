#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fleet/KeyValueStore.hpp"
#include "fleet/NodeRecord.hpp"

namespace airlock::fleet {

// The fleet's keys (values are small JSON).
namespace keys {
inline const std::string kNodes = "/airlock/nodes/";        // <name>, under the node's lease
inline const std::string kMembers = "/airlock/members/";    // <name>: every node that ever joined
inline const std::string kDraining = "/airlock/draining/";  // <name>: an admin's drain
}  // namespace keys

// A node of the fleet as GET /v1/nodes shows it.
struct NodeStatus {
    NodeRecord record;  // the live record; for a down node, its name and URL
    bool up = false;    // its lease is alive
    bool draining = false;
    std::int64_t epoch = 0;  // the live record's create revision
};

// This node's membership: a lease of a few seconds kept alive from a thread
// of its own, the node's record under it (its capacity refreshed as it
// changes), and the fleet's node list. etcd does the membership: a node
// whose renewals stop loses its key when the lease runs out, and every node
// sees it gone. Airlock elects nothing.
//
// The node's epoch is its key's create revision: every join makes a new
// one, so a record written under an old epoch can be told from the
// current one. A restart within the lease's lifetime adopts the lease it
// saved (same epoch); a node name held by another live lease is refused.
class NodeMembership {
  public:
    struct Timing {
        std::chrono::seconds ttl{9};  // down within ttl (+ an etcd election) of the last renewal
        std::chrono::milliseconds renewEvery{3000};
        std::chrono::milliseconds nameWait{11'000};  // for a dead holder's lease to run out
    };
    using CapacityProbe = std::function<NodeCapacity()>;

    // leaseFile: where the lease id is kept across restarts (the data dir).
    NodeMembership(KeyValueStore& store, NodeRecord self, std::string leaseFile,
                   CapacityProbe capacity, Timing timing);
    NodeMembership(KeyValueStore& store, NodeRecord self, std::string leaseFile,
                   CapacityProbe capacity)
        : NodeMembership(store, std::move(self), std::move(leaseFile), std::move(capacity),
                         Timing{}) {}
    ~NodeMembership();
    NodeMembership(const NodeMembership&) = delete;
    NodeMembership& operator=(const NodeMembership&) = delete;

    // Registers the node and starts renewing. Throws Error(unavailable)
    // when etcd does not answer, Error(conflict) when a live node holds the name.
    void join();
    // Stops renewing and revokes the lease: the others see the node leave
    // at once. Never throws.
    void leave();

    const std::string& name() const { return self_.name; }
    const std::string& url() const { return self_.url; }
    std::int64_t epoch() const { return epoch_.load(); }
    // The lease may have run out: no renewal succeeded within ttl - 1 s.
    bool fenced() const;
    // Every node that joined, up or down, by name.
    std::vector<NodeStatus> nodes();
    // Publishes the capacity now (after a create or a delete), not at the
    // next renewal.
    void refresh();
    // An admin's drain of a node (any node's): kept without a lease, so a
    // restart of the node does not undo it.
    void setDraining(const std::string& node, bool draining);

  private:
    void renewLoop();
    void acquire();  // lease + record; sets lease_, epoch_
    bool adoptSavedLease();
    void writeRecord(bool force);
    void saveLease() const;

    KeyValueStore& store_;
    NodeRecord self_;
    std::string leaseFile_;
    CapacityProbe capacity_;
    Timing timing_;

    std::mutex mutex_;  // lease_, lastRecord_ (held across etcd calls)
    std::int64_t lease_ = 0;
    std::string lastRecord_;
    // When the last renewal that succeeded was sent (steady clock ticks).
    std::atomic<std::chrono::steady_clock::rep> lastRenewal_{0};
    std::atomic<std::int64_t> epoch_{0};

    std::mutex stopMutex_;
    std::condition_variable stopCv_;
    bool stopping_ = false;
    bool refreshWanted_ = false;
    std::thread renewer_;
};

}  // namespace airlock::fleet

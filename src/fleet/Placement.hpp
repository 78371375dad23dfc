#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "fleet/NodeMembership.hpp"

namespace airlock::fleet {

// What a create needs of a node.
struct PlacementRequest {
    std::string templateName;  // a template the node can boot
    std::string snapshot;      // or a snapshot whose files it holds (a clone lands there)
    unsigned vcpus = 1;
    std::uint64_t memoryMib = 256;
};

// A node a create may go to, best first, and why it ranks there.
struct PlacementChoice {
    std::string node;
    double score = 0;  // lower is better
    std::string why;
};

// Where a create goes, as E2B's best-of-K: among nodes that are up, not
// draining, able to run the request (its template, or the snapshot's
// files) and with the memory for it, K are sampled at random (not every
// node scanned), scored by the load they would carry (allocated vCPUs
// over 4x their CPUs and memory in use, half each, counting the
// creates this node sent them moments ago that their records do not show
// yet), a warm template counting as a quarter less; the lowest goes first.
// The other eligible nodes follow, for the retries. Nothing eligible: empty.
class Placement {
  public:
    explicit Placement(std::size_t sample = 3, std::uint32_t seed = std::random_device{}());
    std::vector<PlacementChoice> rank(const std::vector<NodeStatus>& nodes,
                                      const PlacementRequest& request);
    // A create this node sent to `node`: counted for a few seconds, until
    // the node's own record says it.
    void sent(const std::string& node, unsigned vcpus);

  private:
    unsigned inflight(const std::string& node);
    std::size_t sample_;
    std::mutex mutex_;
    std::mt19937 rng_;
    struct Sent {
        std::chrono::steady_clock::time_point at;
        unsigned vcpus;
    };
    std::map<std::string, std::vector<Sent>> sent_;
};

}  // namespace airlock::fleet

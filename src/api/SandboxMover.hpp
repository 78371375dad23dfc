#pragma once
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "controller/SandboxMoves.hpp"
#include "fleet/Fleet.hpp"

namespace airlock::api {

// A drain with move, on the drained node: each running sandbox is held,
// its memory and disk sent to another node (placed as a create would be,
// this node aside) in bounded pieces, started there under the same id, and
// only then removed here. One that cannot move stays here, running.
class SandboxMover {
  public:
    SandboxMover(SandboxMoves& moves, fleet::Fleet& fleet) : moves_(moves), fleet_(fleet) {}
    ~SandboxMover();
    SandboxMover(const SandboxMover&) = delete;
    SandboxMover& operator=(const SandboxMover&) = delete;

    // Starts moving every sandbox that can move (on a thread of its own);
    // the ids it will try. While a drain runs, a second adds nothing.
    std::vector<std::string> start();
    // Held for a move now (its new node may answer for it already).
    bool leaving(const std::string& id) { return moves_.leaving(id); }
    // A move in flight ends (its sandbox goes on here); none starts again.
    void stop();
    // Where each sandbox of the last drain went, or why it stayed.
    std::map<std::string, std::string> outcomes();

  private:
    void run(std::vector<SandboxRecord> sandboxes);
    // The node it went to; throws why it could not go anywhere.
    std::string moveOne(const SandboxRecord& r);
    // Sends it to one node: throws why that node did not take it.
    void sendTo(const std::string& node, const OutgoingMove& out);

    SandboxMoves& moves_;
    fleet::Fleet& fleet_;
    std::mutex mutex_;
    std::thread thread_;
    bool running_ = false;
    std::atomic<bool> stopping_{false};
    std::map<std::string, std::string> outcomes_;
};

}  // namespace airlock::api

#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agentclient/AgentConnection.hpp"
#include "workspace/CheckoutArchive.hpp"
#include "workspace/WorkingTree.hpp"

namespace airlock::workspace {

// What the workspace reads from and sends to a guest's working tree, as the
// workspace's owner there (the agent's user): a scan of its entries, one
// file's bytes, a checkout archive unpacked into it. The guest answers are
// bounded and waited for with one deadline each.
class WorkspaceGuest {
  public:
    static constexpr std::uint64_t kMaxScanBytes = 64ull << 20;

    explicit WorkspaceGuest(std::string user,
                            std::chrono::milliseconds wait = std::chrono::minutes(5))
        : user_(std::move(user)), wait_(wait) {}

    // The tree under `root` without `skip` (submodules); `withIgnored`: the
    // git-ignored paths are listed too.
    Scan scan(AgentConnection& agent, const std::string& root, const std::vector<std::string>& skip,
              bool withIgnored) const;
    // One file's bytes: Error(payload_too_large) past `limit`, the guest's
    // Error(not_found) when it is gone.
    std::string readFile(AgentConnection& agent, const std::string& path,
                         std::uint64_t limit) const;
    // An archive `fill` writes, unpacked under `root`; a throw from `fill`
    // resets the stream (the guest keeps what it unpacked by then).
    void unpack(AgentConnection& agent, const std::string& root,
                const std::function<void(CheckoutArchive&)>& fill) const;

  private:
    std::string user_;
    std::chrono::milliseconds wait_;
};

}  // namespace airlock::workspace

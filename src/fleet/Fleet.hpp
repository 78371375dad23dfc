#pragma once
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fleet/HttpExchange.hpp"
#include "fleet/NodeCredential.hpp"
#include "fleet/NodeMembership.hpp"
#include "fleet/ObjectDirectory.hpp"
#include "fleet/Placement.hpp"
#include "fleet/SandboxDirectory.hpp"

namespace airlock::fleet {

// What the front doors see of the fleet: this node's name, where each
// sandbox lives, how to reach and sign for another node.
class Fleet {
  public:
    // peerTls verifies nodes whose advertise URL is https (--cluster-ca);
    // null: the system's trust store. Without plainHttpPeers a node that
    // advertises http:// beyond loopback is not called.
    Fleet(KeyValueStore& store, NodeMembership& membership, NodeCredential credential,
          std::shared_ptr<boost::asio::ssl::context> peerTls = nullptr,
          bool plainHttpPeers = false);

    const std::string& self() const { return membership_.name(); }
    NodeMembership& membership() { return membership_; }
    SandboxDirectory& directory() { return directory_; }
    ObjectDirectory& approvals() { return approvals_; }
    ObjectDirectory& evidence() { return evidence_; }
    const NodeCredential& credential() const { return credential_; }
    Placement& placement() { return placement_; }

    struct Node {
        std::string name, url;
        bool up = false;
    };
    // A node by name from a node list at most a second old (forwarding
    // reads it per request); nullopt: no such node ever joined.
    std::optional<Node> node(const std::string& name);
    std::vector<Node> nodes();
    // How to reach an up node (TLS when its advertise URL is https);
    // nullopt when it is down or unknown.
    std::optional<HttpPeer> peer(const std::string& name);
    // How to reach an advertise URL; nullopt when it is not one.
    std::optional<HttpPeer> peerAt(const std::string& url);

  private:
    void refreshLocked();
    NodeMembership& membership_;
    SandboxDirectory directory_;
    ObjectDirectory approvals_;
    ObjectDirectory evidence_;
    NodeCredential credential_;
    std::shared_ptr<boost::asio::ssl::context> peerTls_;
    bool plainHttpPeers_;
    std::set<std::string> refusedUrls_;  // logged once each
    Placement placement_;
    std::mutex mutex_;
    std::vector<Node> nodes_;
    std::chrono::steady_clock::time_point readAt_{};
};

}  // namespace airlock::fleet

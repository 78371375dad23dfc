#include "fleet/Fleet.hpp"

namespace airlock::fleet {

Fleet::Fleet(KeyValueStore& store, NodeMembership& membership, NodeCredential credential)
    : membership_(membership), directory_(store), approvals_(store), credential_(std::move(credential)) {}

void Fleet::refreshLocked() {
    auto now = std::chrono::steady_clock::now();
    if (now - readAt_ < std::chrono::seconds(1) && !nodes_.empty()) return;
    std::vector<Node> fresh;
    for (const auto& s : membership_.nodes()) fresh.push_back({s.record.name, s.record.url, s.up});
    nodes_ = std::move(fresh);
    readAt_ = now;
}

std::optional<Fleet::Node> Fleet::node(const std::string& name) {
    std::lock_guard lock(mutex_);
    refreshLocked();
    for (const auto& n : nodes_)
        if (n.name == name) return n;
    return std::nullopt;
}

std::vector<Fleet::Node> Fleet::nodes() {
    std::lock_guard lock(mutex_);
    refreshLocked();
    return nodes_;
}

std::optional<HttpPeer> Fleet::peer(const std::string& name) {
    auto n = node(name);
    HttpPeer p;
    bool tls = false;
    if (!n || !n->up || !parseOrigin(n->url, tls, p.host, p.port) || tls) return std::nullopt;
    return p;
}

}  // namespace airlock::fleet

#include "fleet/Fleet.hpp"

#include <boost/asio/ssl/context.hpp>

#include "core/Log.hpp"
#include "fleet/ClientTls.hpp"

namespace airlock::fleet {

Fleet::Fleet(KeyValueStore& store, NodeMembership& membership, NodeCredential credential,
             std::shared_ptr<boost::asio::ssl::context> peerTls, bool plainHttpPeers)
    : membership_(membership),
      directory_(store),
      approvals_(store, "approvals"),
      evidence_(store, "evidence"),
      credential_(std::move(credential)),
      peerTls_(std::move(peerTls)),
      plainHttpPeers_(plainHttpPeers) {}

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
    if (!n || !n->up) return std::nullopt;
    return peerAt(n->url);
}

std::optional<HttpPeer> Fleet::peerAt(const std::string& url) {
    HttpPeer p;
    bool tls = false;
    if (!parseOrigin(url, tls, p.host, p.port)) return std::nullopt;
    if (!plainHttpPeers_ && plainHttpBeyondLoopback(url)) {
        std::lock_guard lock(mutex_);
        if (refusedUrls_.size() < 1000 && refusedUrls_.insert(url).second)
            logWarn("fleet", "node at " + url +
                                 " is not called: plain http beyond loopback (give it https, or "
                                 "start every node with --cluster-plain-http)");
        return std::nullopt;
    }
    if (tls) {
        std::lock_guard lock(mutex_);
        // The system's trust store, read once, when no --cluster-ca names one.
        if (!peerTls_) peerTls_ = makeClientTls("", "", "", "the system's trust store");
        p.tls = peerTls_.get();
    }
    return p;
}

}  // namespace airlock::fleet

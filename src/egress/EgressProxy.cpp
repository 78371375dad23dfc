#include "egress/EgressProxy.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>

#include "agentclient/AgentConnection.hpp"
#include "agentclient/GuestListener.hpp"
#include "core/Error.hpp"
#include "core/Log.hpp"
#include "egress/EgressSession.hpp"
#include "egress/HostLookup.hpp"
#include "protocol/Messages.hpp"

namespace airlock::egress {
namespace asio = boost::asio;
using Kind = AgentStream::Event::Kind;

EgressProxy::EgressProxy(asio::io_context& ioc, asio::thread_pool& workers, EgressSettings settings,
                         EgressAuditSink audit, EgressResolver resolver)
    : shared_(std::make_shared<EgressShared>(
          EgressShared{ioc, workers, settings, AddressPolicy(settings.allowCidrs), std::move(audit),
                       resolver ? std::move(resolver) : &lookUpHost})) {}

EgressProxy::~EgressProxy() {
    std::lock_guard lock(mutex_);
    sandboxes_.clear();
}

void EgressProxy::attach(const std::string& sandboxId, const std::string& tenant,
                         const std::shared_ptr<AgentConnection>& agent,
                         const EgressAllowlist& allow) {
    {
        std::lock_guard lock(mutex_);
        auto it = sandboxes_.find(sandboxId);
        if (it != sandboxes_.end() && it->second->agent.lock() == agent && it->second->listener &&
            !it->second->listener->finished()) {
            std::lock_guard l(it->second->mutex);
            it->second->allow = allow;
            return;
        }
    }
    auto egress =
        std::make_shared<SandboxEgress>(sandboxId, tenant, allow, shared_->settings.bytesPerSecond);
    egress->agent = agent;
    std::weak_ptr<EgressShared> weakShared = shared_;
    std::weak_ptr<SandboxEgress> weakEgress = egress;
    auto onAccepted = [weakShared, weakEgress](std::uint64_t connection) {
        auto shared = weakShared.lock();
        auto eg = weakEgress.lock();
        if (!shared || !eg) return;
        std::make_shared<EgressSession>(shared, eg, connection)->start();
    };
    auto onEnded = [weakEgress](const std::string& why) {
        if (auto eg = weakEgress.lock())
            logWarn("egress", "proxy listener of " + eg->id + " ended: " + why);
    };
    auto listener = GuestListener::open(*agent, shared_->settings.guestPort,
                                        "egress proxy listener", onAccepted, onEnded);
    egress->listener = std::move(listener.stream);
    egress->guestPort = listener.port;
    std::lock_guard l(mutex_);
    sandboxes_[sandboxId] = egress;
}

bool EgressProxy::update(const std::string& sandboxId, const EgressAllowlist& allow) {
    std::lock_guard lock(mutex_);
    auto it = sandboxes_.find(sandboxId);
    if (it == sandboxes_.end()) return false;
    std::lock_guard l(it->second->mutex);
    it->second->allow = allow;
    return true;
}

void EgressProxy::detach(const std::string& sandboxId) {
    std::shared_ptr<SandboxEgress> gone;
    {
        std::lock_guard lock(mutex_);
        auto it = sandboxes_.find(sandboxId);
        if (it == sandboxes_.end()) return;
        gone = std::move(it->second);
        sandboxes_.erase(it);
    }
    // Judged by an empty list from now on; the listener goes with the stream.
    {
        std::lock_guard l(gone->mutex);
        gone->allow = EgressAllowlist();
    }
    gone->listener.reset();
}

std::vector<unsigned> EgressProxy::listenerPorts() const {
    // 0: a free port per sandbox (tests with an in-process agent), none fixed.
    if (shared_->settings.guestPort == 0) return {};
    return {shared_->settings.guestPort};
}

unsigned EgressProxy::guestPort(const std::string& sandboxId) {
    std::lock_guard lock(mutex_);
    auto it = sandboxes_.find(sandboxId);
    return it == sandboxes_.end() ? 0 : it->second->guestPort;
}

unsigned EgressProxy::openConnections(const std::string& sandboxId) {
    std::lock_guard lock(mutex_);
    auto it = sandboxes_.find(sandboxId);
    return it == sandboxes_.end() ? 0 : it->second->open.load();
}

}  // namespace airlock::egress

#include "egress/EgressProxy.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>

#include "agentclient/AgentConnection.hpp"
#include "agentclient/GuestListener.hpp"
#include "core/Error.hpp"
#include "core/Log.hpp"
#include "egress/EgressSession.hpp"
#include "egress/HostLookup.hpp"
#include "egress/InterceptedConnection.hpp"
#include "protocol/Messages.hpp"

namespace airlock::egress {
namespace asio = boost::asio;
using Kind = AgentStream::Event::Kind;

EgressProxy::EgressProxy(asio::io_context& ioc, asio::thread_pool& workers, EgressSettings settings,
                         EgressAuditSink audit, EgressResolver resolver)
    : shared_(std::make_shared<EgressShared>(EgressShared{
          ioc, workers, settings, AddressPolicy(settings.allowCidrs), std::move(audit),
          resolver ? std::move(resolver) : &lookUpHost, InterceptedConnection::guestServerTls(),
          InterceptedConnection::upstreamClientTls(settings.upstreamCaFile)})),
      sandboxes_(std::make_unique<GuestAttachments<SandboxEgress>>()) {}

EgressProxy::~EgressProxy() = default;

void EgressProxy::attach(const std::string& sandboxId, const std::string& tenant,
                         const std::shared_ptr<AgentConnection>& agent,
                         const EgressAllowlist& allow) {
    if (sandboxes_->refresh(sandboxId, agent, allow)) return;
    auto egress = std::make_shared<SandboxEgress>(sandboxId, tenant, agent, allow,
                                                  shared_->settings.bytesPerSecond);
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
    egress->addListener(
        kListener, GuestListener::open(*agent, shared_->settings.guestPort, "egress proxy listener",
                                       onAccepted, onEnded));
    sandboxes_->install(std::move(egress));
}

bool EgressProxy::update(const std::string& sandboxId, const EgressAllowlist& allow) {
    return sandboxes_->update(sandboxId, allow);
}

// Judged by an empty list from now on; the listener goes with the stream.
void EgressProxy::detach(const std::string& sandboxId) { sandboxes_->remove(sandboxId); }

std::vector<unsigned> EgressProxy::listenerPorts() const {
    // 0: a free port per sandbox (tests with an in-process agent), none fixed.
    if (shared_->settings.guestPort == 0) return {};
    return {shared_->settings.guestPort};
}

bool EgressProxy::setInjections(const std::string& sandboxId,
                                std::shared_ptr<const SandboxInjections> injections) {
    auto egress = sandboxes_->find(sandboxId);
    if (!egress) return false;
    egress->setInjections(std::move(injections));
    return true;
}

unsigned EgressProxy::guestPort(const std::string& sandboxId) {
    auto egress = sandboxes_->find(sandboxId);
    return egress ? egress->guestPort(kListener) : 0;
}

unsigned EgressProxy::openConnections(const std::string& sandboxId) {
    auto egress = sandboxes_->find(sandboxId);
    return egress ? egress->open.load() : 0;
}

}  // namespace airlock::egress

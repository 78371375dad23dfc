#include "packages/PackageProxy.hpp"

#include "agentclient/AgentConnection.hpp"
#include "agentclient/GuestListener.hpp"
#include "packages/PackageSession.hpp"

namespace airlock::packages {

PackageProxy::PackageProxy(boost::asio::io_context& ioc, std::shared_ptr<PackageService> service,
                           PackageProxySettings settings)
    : shared_(std::make_shared<PackageProxyShared>(ioc, std::move(service), settings)) {}

PackageProxy::~PackageProxy() {
    sandboxes_.clear();
    // Answers being computed finish; queued ones are dropped with their
    // sessions (their tunnels are reset).
    shared_->workers.stop();
    shared_->workers.join();
}

bool PackageProxy::serves(Ecosystem e) const { return shared_->service->upstreams().serves(e); }

void PackageProxy::attach(const std::string& sandboxId, const std::string& tenant,
                          const std::shared_ptr<AgentConnection>& agent,
                          const PackageRules& rules) {
    if (sandboxes_.refresh(sandboxId, agent, rules)) return;
    auto sandbox = std::make_shared<SandboxPackageAttachment>(sandboxId, tenant, agent, rules);
    const auto& settings = shared_->settings;
    for (Ecosystem e : {Ecosystem::npm, Ecosystem::pypi, Ecosystem::apt}) {
        if (!serves(e)) continue;
        unsigned port = e == Ecosystem::npm    ? settings.npmPort
                        : e == Ecosystem::pypi ? settings.pypiPort
                                               : settings.aptPort;
        std::weak_ptr<PackageProxyShared> weakShared = shared_;
        std::weak_ptr<SandboxPackageAttachment> weakSandbox = sandbox;
        // On the agent's reader thread: counted here, the rest on the session's strand.
        auto onAccepted = [weakShared, weakSandbox, e](std::uint64_t connection) {
            auto shared = weakShared.lock();
            auto s = weakSandbox.lock();
            if (!shared || !s || s->detached()) return;
            bool admitted = shared->admit(*s);
            std::make_shared<PackageSession>(shared, s, e, connection, admitted)->start();
        };
        sandbox->addListener(
            static_cast<unsigned>(e),
            GuestListener::open(*agent, port, std::string(ecosystemName(e)) + " package listener",
                                onAccepted));
    }
    sandboxes_.install(std::move(sandbox));
}

bool PackageProxy::update(const std::string& sandboxId, const PackageRules& rules) {
    return sandboxes_.update(sandboxId, rules);
}

void PackageProxy::detach(const std::string& sandboxId) { sandboxes_.remove(sandboxId); }

std::vector<unsigned> PackageProxy::listenerPorts() const {
    // Every ecosystem's port, served or not: the set does not depend on upstreams.
    std::vector<unsigned> out;
    const auto& s = shared_->settings;
    for (unsigned p : {s.npmPort, s.pypiPort, s.aptPort})
        if (p != 0) out.push_back(p);  // 0: a free port (tests with an in-process agent)
    return out;
}

unsigned PackageProxy::guestPort(const std::string& sandboxId, Ecosystem e) {
    auto sandbox = sandboxes_.find(sandboxId);
    return sandbox ? sandbox->guestPort(static_cast<unsigned>(e)) : 0;
}

unsigned PackageProxy::openConnections(const std::string& sandboxId) {
    auto sandbox = sandboxes_.find(sandboxId);
    return sandbox ? sandbox->open.load() : 0;
}

}  // namespace airlock::packages

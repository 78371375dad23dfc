#include "egress/EgressProxy.hpp"

#include <netdb.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <condition_variable>

#include "agentclient/AgentConnection.hpp"
#include "core/Error.hpp"
#include "core/Log.hpp"
#include "egress/EgressSession.hpp"
#include "protocol/Messages.hpp"

namespace airlock::egress {
namespace asio = boost::asio;
using Kind = AgentStream::Event::Kind;

EgressProxy::EgressProxy(asio::io_context& ioc, asio::thread_pool& workers, EgressSettings settings,
                         EgressAuditSink audit, EgressResolver resolver)
    : shared_(std::make_shared<EgressShared>(
          EgressShared{ioc, workers, settings, AddressPolicy(settings.allowCidrs), std::move(audit),
                       resolver ? std::move(resolver) : &EgressProxy::systemResolve})) {}

EgressProxy::~EgressProxy() {
    std::lock_guard lock(mutex_);
    sandboxes_.clear();
}

std::vector<asio::ip::address> EgressProxy::systemResolve(const std::string& host,
                                                          std::string& error) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
    std::vector<asio::ip::address> out;
    if (rc != 0) {
        error = ::gai_strerror(rc);
        return out;
    }
    for (addrinfo* p = res; p; p = p->ai_next) {
        asio::ip::tcp::endpoint ep;
        if (p->ai_addrlen > ep.capacity()) continue;
        std::memcpy(ep.data(), p->ai_addr, p->ai_addrlen);
        ep.resize(p->ai_addrlen);
        if (std::find(out.begin(), out.end(), ep.address()) == out.end())
            out.push_back(ep.address());
    }
    ::freeaddrinfo(res);
    return out;
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
    struct Listening {
        std::mutex mutex;
        std::condition_variable cv;
        bool done = false;
        unsigned port = 0;
        std::string error;
    };
    auto listening = std::make_shared<Listening>();
    std::weak_ptr<EgressShared> weakShared = shared_;
    std::weak_ptr<SandboxEgress> weakEgress = egress;
    // Runs on the agent connection's reader thread: must not block, and
    // nothing the guest sends may throw out of it.
    auto onEvent = [weakShared, weakEgress, listening](AgentStream::Event&& e) {
        auto settle = [&](unsigned port, std::string error) {
            std::lock_guard lock(listening->mutex);
            if (listening->done) return;
            listening->done = true;
            listening->port = port;
            listening->error = std::move(error);
            listening->cv.notify_all();
        };
        if (e.kind == Kind::reset || e.kind == Kind::close) {
            std::string why =
                e.kind == Kind::reset ? protocol::parseResetInfo(e.payload).message : "closed";
            settle(0, why);
            if (auto eg = weakEgress.lock())
                logWarn("egress", "proxy listener of " + eg->id + " ended: " + why);
            return;
        }
        if (e.kind != Kind::control) return;
        auto j = nlohmann::json::parse(e.payload, nullptr, false);
        if (!j.is_object()) return;
        if (auto p = j.find("listening"); p != j.end() && p->is_number_unsigned())
            return settle(p->get<unsigned>(), "");
        auto a = j.find("accepted");
        if (a == j.end() || !a->is_number_unsigned()) return;
        auto shared = weakShared.lock();
        auto eg = weakEgress.lock();
        if (!shared || !eg) return;
        auto session = std::make_shared<EgressSession>(shared, eg, a->get<std::uint64_t>());
        session->start();
    };
    auto handler = [onEvent](AgentStream::Event&& e) {
        try {
            onEvent(std::move(e));
        } catch (...) {
            logWarn("egress", "ignored a malformed event from a guest's proxy listener");
        }
    };
    auto stream =
        agent->open({{"op", "egress_listen"}, {"port", shared_->settings.guestPort}}, handler);
    std::unique_lock lock(listening->mutex);
    if (!listening->cv.wait_for(lock, std::chrono::seconds(10), [&] { return listening->done; }))
        throw Error(ErrorCode::agent_timeout, "the guest did not open its egress proxy listener");
    if (listening->port == 0)
        throw Error(ErrorCode::agent_error,
                    "the guest could not open its egress proxy listener: " + listening->error);
    egress->listener = std::move(stream);
    egress->guestPort = listening->port;
    lock.unlock();
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

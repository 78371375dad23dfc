#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agentclient/GuestAttachments.hpp"
#include "egress/AddressPolicy.hpp"
#include "egress/EgressGateway.hpp"
#include "egress/SandboxCa.hpp"
#include "egress/SecretHeaders.hpp"

namespace airlock::egress {

struct EgressSettings {
    std::vector<CidrRange> allowCidrs;  // --egress-allow-cidr: ranges opened despite being private
    unsigned maxConnections = 64;       // per sandbox, open at once
    std::uint64_t bytesPerSecond = 20ull << 20;  // per sandbox, both directions together
    unsigned guestPort = kGuestProxyPort;  // 0: any free port (tests with an in-process agent)
    std::chrono::milliseconds headTimeout{15'000};
    std::chrono::milliseconds connectTimeout{15'000};
    std::chrono::milliseconds idleTimeout{300'000};
    // Hosts egress never opens, whatever the allowlist: the package
    // registries, reached only through the package proxy.
    std::vector<std::string> reservedHosts;
    unsigned maxAuditPerMinute =
        600;  // per sandbox; beyond it attempts are counted (egress.suppressed)
    // --egress-ca-file: a CA the hosts that get injected secrets may chain
    // to, besides the system's trust store.
    std::string upstreamCaFile;
};

// A sandbox's secrets the proxy adds to requests (the guest never holds
// their values) and the CA its guest trusts for the hosts they go to.
struct SandboxInjections {
    std::shared_ptr<SandboxCa> ca;
    std::vector<InjectedSecret> secrets;
    bool covers(const std::string& host, unsigned port) const {
        for (const auto& s : secrets)
            if (s.coversHost(host, port)) return true;
        return false;
    }
};

// Where decisions go: the audit log in airlockd. type is egress.allowed,
// egress.denied or egress.failed; data has destination, reason, resolved
// address, bytes each way.
using EgressAuditSink = std::function<void(const std::string& sandboxId, const std::string& tenant,
                                           const std::string& type, const nlohmann::json& data)>;
// Resolves a host name to addresses (blocking; runs on a worker). Tests
// substitute one to play a DNS server that rebinds names to private addresses.
using EgressResolver = std::function<std::vector<boost::asio::ip::address>(const std::string& host,
                                                                           std::string& error)>;

struct EgressShared;
struct SandboxEgress;

// The host end of sandbox egress: for each attached sandbox it keeps the
// guest's proxy listener open over the agent channel and serves every
// connection the guest accepts (EgressSession): parse the proxy request,
// judge the host name against the allowlist, resolve it here, refuse
// special-purpose addresses, connect to the very address that was checked
// (so a name cannot rebind between check and use), relay with the
// sandbox's bandwidth and connection caps, and audit the attempt.
class EgressProxy : public EgressGateway {
  public:
    EgressProxy(boost::asio::io_context& ioc, boost::asio::thread_pool& workers,
                EgressSettings settings, EgressAuditSink audit, EgressResolver resolver = {});
    ~EgressProxy() override;

    void attach(const std::string& sandboxId, const std::string& tenant,
                const std::shared_ptr<AgentConnection>& agent,
                const EgressAllowlist& allow) override;
    bool update(const std::string& sandboxId, const EgressAllowlist& allow) override;
    void detach(const std::string& sandboxId) override;
    std::vector<unsigned> listenerPorts() const override;

    // The secrets added for an attached sandbox from its next connection on
    // (null: none); false when it is not attached.
    bool setInjections(const std::string& sandboxId,
                       std::shared_ptr<const SandboxInjections> injections) override;

    // The guest port of an attached sandbox's listener (0 if none).
    unsigned guestPort(const std::string& sandboxId);
    unsigned openConnections(const std::string& sandboxId);

  private:
    static constexpr unsigned kListener = 0;  // its one listener
    std::shared_ptr<EgressShared> shared_;
    std::unique_ptr<GuestAttachments<SandboxEgress>> sandboxes_;
};

}  // namespace airlock::egress

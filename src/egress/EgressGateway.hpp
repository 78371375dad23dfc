#pragma once
#include <memory>
#include <string>
#include <vector>

#include "egress/EgressAllowlist.hpp"

namespace airlock {
class AgentConnection;
}

namespace airlock::egress {

struct SandboxInjections;

// What the controller tells the egress side (the host proxy in airlockd;
// a recorder in unit tests). Guests have no network interface but lo; every
// sandbox is attached, and one with an empty allowlist is refused
// everything (and audited).
class EgressGateway {
  public:
    virtual ~EgressGateway() = default;
    // The sandbox's agent session is (re)established: open the guest's proxy
    // listener on it. Returns once the guest listens (or throws Error).
    virtual void attach(const std::string& sandboxId, const std::string& tenant,
                        const std::shared_ptr<AgentConnection>& agent,
                        const EgressAllowlist& allow) = 0;
    // New allowlist for a running sandbox: connections opened from now on are
    // judged by it. False when the sandbox is not attached.
    virtual bool update(const std::string& sandboxId, const EgressAllowlist& allow) = 0;
    // The sandbox is going away: stop listening, cut its connections.
    virtual void detach(const std::string& sandboxId) = 0;
    // The secrets the proxy adds for the sandbox (null: none), from its next
    // connection on. False when it is not attached (or this gateway adds none).
    virtual bool setInjections(const std::string& sandboxId,
                               std::shared_ptr<const SandboxInjections> injections) {
        (void)sandboxId;
        (void)injections;
        return false;
    }
    // The guest ports its listeners take: Airlock's own, never reachable
    // from outside the guest (preview ports, E2B port routing).
    virtual std::vector<unsigned> listenerPorts() const;
    static std::vector<unsigned> defaultListenerPorts();
};

// The guest port the agent serves the proxy on; commands get
// http_proxy=http://127.0.0.1:kGuestProxyPort and friends.
inline constexpr unsigned kGuestProxyPort = 3128;
inline std::vector<unsigned> EgressGateway::defaultListenerPorts() { return {kGuestProxyPort}; }
inline std::vector<unsigned> EgressGateway::listenerPorts() const { return defaultListenerPorts(); }

}  // namespace airlock::egress

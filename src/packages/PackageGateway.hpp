#pragma once
#include <memory>
#include <string>
#include <vector>

#include "packages/PackageRules.hpp"

namespace airlock {
class AgentConnection;
}

namespace airlock::packages {

// The guest ports of the package proxy (loopback in every guest). Templates
// point npm, pip and apt at them; commands also get npm_config_registry
// and PIP_INDEX_URL.
inline constexpr unsigned kGuestNpmPort = 4873;
inline constexpr unsigned kGuestPypiPort = 3141;
inline constexpr unsigned kGuestAptPort = 3142;

// What the controller tells the package side (the proxy in airlockd).
class PackageGateway {
  public:
    virtual ~PackageGateway() = default;
    // The sandbox's agent session is (re)established: open its package
    // listeners (one per ecosystem with an upstream). Throws Error.
    virtual void attach(const std::string& sandboxId, const std::string& tenant,
                        const std::shared_ptr<AgentConnection>& agent,
                        const PackageRules& rules) = 0;
    virtual bool update(const std::string& sandboxId, const PackageRules& rules) = 0;
    virtual void detach(const std::string& sandboxId) = 0;
    virtual bool serves(Ecosystem e) const = 0;
    // The guest ports its listeners take: Airlock's own, never reachable
    // from outside the guest (preview ports, E2B port routing).
    virtual std::vector<unsigned> listenerPorts() const { return defaultListenerPorts(); }
    // Without a package proxy the templates still point at these.
    static std::vector<unsigned> defaultListenerPorts() {
        return {kGuestNpmPort, kGuestPypiPort, kGuestAptPort};
    }
};

}  // namespace airlock::packages

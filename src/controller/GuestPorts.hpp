#pragma once
#include <memory>
#include <string>
#include <vector>

#include "agentclient/AgentStream.hpp"
#include "controller/PreviewPorts.hpp"
#include "controller/SandboxAccess.hpp"
#include "store/PortStore.hpp"

namespace airlock {

// A sandbox's ports as clients reach them: preview ports a tenant exposes
// (each with its own token, the preview URL's only credential) and tunnels
// to a guest port over the agent channel. No lock of its own: the exposed
// ports are rows of the store.
class GuestPorts {
  public:
    GuestPorts(SandboxAccess& sandboxes, PortStore& store)
        : sandboxes_(sandboxes), previews_(store) {}
    // The guest ports of Airlock's own services in the guest (the egress and
    // package proxies' listeners, as their gateways report them): never
    // exposed, previewed or tunnelled to. Set once, before any request.
    void setInternalPorts(std::vector<unsigned> ports) { internal_ = std::move(ports); }
    const std::vector<unsigned>& internalPorts() const { return internal_; }
    // Error(forbidden) for one of them, before anything is opened.
    void requireReachable(unsigned port) const;

    ExposedPort expose(const std::string& tenant, const std::string& id, unsigned port);
    std::vector<ExposedPort> list(const std::string& tenant, const std::string& id);
    void close(const std::string& tenant, const std::string& id, unsigned port);
    // For the preview proxy: no API key, the port's own token instead. A
    // wrong sandbox, port or token is Error(not_found) alike; a sandbox that
    // is not running, Error(conflict).
    std::shared_ptr<AgentStream> openPreview(const std::string& sandboxId, unsigned port,
                                             const std::string& token,
                                             AgentStream::Handler handler);
    // Whether the token opens that preview (checked before waking a sandbox).
    bool admitsPreview(const std::string& sandboxId, unsigned port, const std::string& token) {
        return previews_.admits(sandboxId, port, token);
    }
    // The E2B front door's public ports (E2B's access rule, checked by the
    // caller): a tunnel to guest 127.0.0.1:port of a running sandbox.
    std::shared_ptr<AgentStream> openTunnel(const std::string& tenant, const std::string& id,
                                            unsigned port, AgentStream::Handler handler);

  private:
    SandboxAccess& sandboxes_;
    PreviewPorts previews_;
    std::vector<unsigned> internal_;
};

}  // namespace airlock

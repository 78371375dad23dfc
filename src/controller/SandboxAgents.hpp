#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "agentclient/AgentConnection.hpp"
#include "controller/AgentSessions.hpp"
#include "controller/AuditRecorder.hpp"
#include "egress/EgressGateway.hpp"
#include "packages/PackageGateway.hpp"
#include "store/SandboxStore.hpp"

namespace airlock {

// Opens the agent connection of an endpoint (a unix socket path or "vsock:CID:PORT").
using AgentConnector = std::function<std::shared_ptr<AgentConnection>(const std::string& endpoint,
                                                                      std::chrono::milliseconds)>;

// A sandbox's agent session as the host uses it: opened on the sandbox's
// endpoint, watched (a guest that breaks the protocol, or floods its channel
// instead of saying hello, is audited as agent.protocol_error), and with
// the host's listeners on it: the egress proxy's and the package proxy's.
// That set-up is the same for a fresh boot's session, a restored one's and
// every reconnect (AgentSessions reopens a session that died). When the
// sandbox goes, its session is retired first (open calls fail with why,
// nothing reconnects to the VM being destroyed) and forgotten after.
class SandboxAgents {
  public:
    struct Parts {
        AgentConnector connector;
        // Where a sandbox's agent listens (its socket, or its vsock CID).
        std::function<std::string(const std::string& sandboxId)> endpointOf;
        SandboxStore& sandboxes;
        AuditRecorder& audit;
        std::shared_ptr<egress::EgressGateway> egress;       // none: no egress listener
        std::shared_ptr<packages::PackageGateway> packages;  // none: no package listeners
        std::chrono::milliseconds reconnectTimeout{15'000};
        // The secrets the egress proxy adds for a sandbox (null: none).
        std::function<std::shared_ptr<const egress::SandboxInjections>(const SandboxRecord&)>
            injectionsOf;
    };
    explicit SandboxAgents(Parts parts);

    // A new session with the sandbox's agent (hello included), not yet in use.
    std::shared_ptr<AgentConnection> connect(const std::string& sandboxId,
                                             std::chrono::milliseconds timeout);
    // Puts a session opened by connect() to use: watched, its listeners
    // attached (before any command can run: they expect their proxy), and
    // kept as the sandbox's session.
    void adopt(const SandboxRecord& sandbox, std::shared_ptr<AgentConnection> agent);
    // The sandbox's live session, reconnected when it died (AgentSessions::get).
    std::shared_ptr<AgentConnection> get(const std::string& sandboxId) {
        return sessions_.get(sandboxId);
    }
    // Its secrets changed: the proxy gets them, and (trustCa) the guest
    // installs the egress CA that came with its first injected one.
    void refreshInjections(const SandboxRecord& sandbox, bool trustCa);
    // The sandbox is going: its listeners are detached and its session
    // retired (AgentSessions::retire); forget() once its VM is gone.
    void retire(const std::string& sandboxId, const std::string& why);
    void forget(const std::string& sandboxId) { sessions_.drop(sandboxId); }
    // Ends every session and waits for their threads (they call back into
    // the audit and the listeners): before those go.
    void closeAll() { sessions_.closeAll(); }
    std::size_t live() const { return sessions_.live(); }

  private:
    void watch(const std::string& sandboxId, const std::shared_ptr<AgentConnection>& agent);
    // The sandbox's injected secrets, which the proxy now has (null: none).
    std::shared_ptr<const egress::SandboxInjections> attachListeners(
        const SandboxRecord& sandbox, const std::shared_ptr<AgentConnection>& agent);
    void protocolError(const std::string& sandboxId, const std::string& why, bool sessionEnded);
    // A sandbox with injected secrets: its guest trusts its egress CA.
    void trustEgressCa(const SandboxRecord& r, AgentConnection& agent,
                       const egress::SandboxInjections& injections);

    Parts p_;
    AgentSessions sessions_;
};

}  // namespace airlock

#pragma once
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "agentclient/GuestAttachments.hpp"
#include "packages/PackageGateway.hpp"
#include "packages/PackageService.hpp"

namespace airlock::packages {

struct PackageProxySettings {
    unsigned maxConnectionsPerSandbox = 12;         // open at once; more get a 503
    unsigned maxConnectionsPerTenant = 24;          // all its sandboxes together
    unsigned threads = 48;  // requests the service answers at once (fetching upstream), all sandboxes
    std::chrono::milliseconds idleTimeout{20'000};  // between requests on a kept-alive connection
    std::chrono::milliseconds headTimeout{15'000};
    std::chrono::milliseconds writeTimeout{60'000};  // a response's floor, plus its size at...
    std::uint64_t minBytesPerSecond = 128 * 1024;    // ...this rate: a guest that stops reading
    // Guest ports (0: any free port, for tests with an in-process agent).
    unsigned npmPort = kGuestNpmPort, pypiPort = kGuestPypiPort, aptPort = kGuestAptPort;
};

// One attached sandbox: its package rules and a listener per ecosystem
// (keyed by the ecosystem's number).
using SandboxPackageAttachment = GuestAttachment<PackageRules>;
struct PackageProxyShared;

// The host end of the package proxy: for each attached sandbox, listeners
// on the guest's package ports (through the agent, as egress), and for each
// connection a PackageSession that reads HTTP/1.1 requests from the
// tunnel, has the PackageService answer them on a worker and streams the
// answers back as the guest's window allows (kept alive). No thread waits
// for a guest: a slow reader holds a file and a timer, nothing more.
class PackageProxy : public PackageGateway {
  public:
    PackageProxy(boost::asio::io_context& ioc, std::shared_ptr<PackageService> service,
                 PackageProxySettings settings);
    ~PackageProxy() override;

    void attach(const std::string& sandboxId, const std::string& tenant,
                const std::shared_ptr<AgentConnection>& agent, const PackageRules& rules) override;
    bool update(const std::string& sandboxId, const PackageRules& rules) override;
    void detach(const std::string& sandboxId) override;
    bool serves(Ecosystem e) const override;
    std::vector<unsigned> listenerPorts() const override;
    // The guest port of a sandbox's listener (0 if none).
    unsigned guestPort(const std::string& sandboxId, Ecosystem e);
    // Connections of a sandbox open now (served or being refused).
    unsigned openConnections(const std::string& sandboxId);

  private:
    std::shared_ptr<PackageProxyShared> shared_;
    GuestAttachments<SandboxPackageAttachment> sandboxes_;
};

}  // namespace airlock::packages

#pragma once
#include <atomic>
#include <boost/asio/thread_pool.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agentclient/AgentStream.hpp"
#include "packages/PackageGateway.hpp"
#include "packages/PackageService.hpp"

namespace airlock::packages {

struct PackageProxySettings {
    unsigned maxConnectionsPerSandbox = 12;         // open at once; more get a 503
    unsigned maxConnectionsPerTenant = 24;          // all its sandboxes together
    unsigned threads = 48;                          // connections served at once, all sandboxes
    std::chrono::milliseconds idleTimeout{20'000};  // between requests on a kept-alive connection
    std::chrono::milliseconds headTimeout{15'000};
    std::chrono::milliseconds writeTimeout{60'000};  // a response's floor, plus its size at...
    std::uint64_t minBytesPerSecond = 128 * 1024;    // ...this rate: a guest that stops reading
    // Guest ports (0: any free port, for tests with an in-process agent).
    unsigned npmPort = kGuestNpmPort, pypiPort = kGuestPypiPort, aptPort = kGuestAptPort;
};

struct SandboxPackageState;

// The host end of the package proxy: for each attached sandbox, listeners
// on the guest's package ports (through the agent, as egress), and for each
// connection a worker that reads HTTP/1.1 requests from the tunnel, has the
// PackageService answer them and writes the answers back (kept alive).
class PackageProxy : public PackageGateway {
  public:
    PackageProxy(std::shared_ptr<PackageService> service, PackageProxySettings settings);
    ~PackageProxy() override;

    void attach(const std::string& sandboxId, const std::string& tenant,
                const std::shared_ptr<AgentConnection>& agent, const PackageRules& rules) override;
    bool update(const std::string& sandboxId, const PackageRules& rules) override;
    void detach(const std::string& sandboxId) override;
    bool serves(Ecosystem e) const override { return service_->upstreams().serves(e); }
    std::vector<unsigned> listenerPorts() const override;
    // The guest port of a sandbox's listener (0 if none).
    unsigned guestPort(const std::string& sandboxId, Ecosystem e);

  private:
    void serveConnection(std::shared_ptr<SandboxPackageState> sandbox, Ecosystem e,
                         std::uint64_t connection, bool over);
    std::shared_ptr<PackageService> service_;
    PackageProxySettings settings_;
    boost::asio::thread_pool pool_;
    std::mutex mutex_;
    std::map<std::string, std::shared_ptr<SandboxPackageState>> sandboxes_;
    std::mutex tenantMutex_;
    std::map<std::string, unsigned> tenantOpen_;  // connections queued or served, per tenant
};

}  // namespace airlock::packages

#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "hypervisor/Hypervisor.hpp"

typedef struct _virConnect* virConnectPtr;

namespace airlock {

struct LibvirtOptions {
    std::string uri;           // empty: qemu:///embed?root=<dataDir>/libvirt
    std::string dataDir;       // holds the embedded driver's root
    Accel accel = Accel::tcg;
};

// The libvirt backend. With the embedded driver no daemon is needed: the
// driver runs inside this process, QEMU runs as libvirt-qemu under libvirt's
// seccomp sandbox, and domains outlive this process (a restart adopts them).
class LibvirtHypervisor : public Hypervisor {
public:
    explicit LibvirtHypervisor(const LibvirtOptions& options);
    ~LibvirtHypervisor() override;

    Accel accel() const override { return accel_; }
    void startDomain(const DomainSpec& spec) override;
    void destroyDomain(const std::string& name) override;
    DomainState domainState(const std::string& name) override;
    std::vector<std::string> listDomains() override;
    std::optional<unsigned> vsockCid(const std::string& name) override;
    void suspendDomain(const std::string& name) override;
    void resumeDomain(const std::string& name) override;
    void saveState(const std::string& name, const std::string& statePath, const std::string& scratchDir) override;
    void loadState(const std::string& name, const std::string& statePath, const std::string& scratchDir) override;
    void switchDiskOverlay(const std::string& name, const std::string& newOverlay) override;

    const std::string& uri() const { return uri_; }

    // Writes the embedded driver's qemu.conf (idempotent).
    static void prepareEmbeddedRoot(const std::string& root);

private:
    Accel accel_;
    std::string uri_;
    std::string embeddedRoot_;  // empty unless the embedded driver is used
    virConnectPtr conn_ = nullptr;
};

}  // namespace airlock

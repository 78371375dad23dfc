#include "hypervisor/LibvirtHypervisor.hpp"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "core/Error.hpp"
#include "core/Log.hpp"
#include "hypervisor/DomainXml.hpp"

namespace airlock {
namespace {

std::string lastLibvirtError() {
    const char* msg = virGetLastErrorMessage();
    return msg ? msg : "unknown libvirt error";
}

void silenceDefaultErrorPrinting(void*, virErrorPtr) {}

// libvirt's default event loop is process-wide: registered once, driven by one
// thread for the life of the process (the embedded driver refuses to open
// without it).
void ensureEventLoop() {
    static std::once_flag once;
    std::call_once(once, [] {
        if (virEventRegisterDefaultImpl() < 0) throw Error(ErrorCode::hypervisor_error, lastLibvirtError());
        virSetErrorFunc(nullptr, silenceDefaultErrorPrinting);
        std::thread([] {
            while (true) virEventRunDefaultImpl();
        }).detach();
    });
}

struct DomainDeleter {
    void operator()(virDomainPtr d) const {
        if (d) virDomainFree(d);
    }
};
using DomainHandle = std::unique_ptr<virDomain, DomainDeleter>;

}  // namespace

void LibvirtHypervisor::prepareEmbeddedRoot(const std::string& root) {
    std::filesystem::create_directories(root + "/etc");
    // stdio_handler=file: there is no virtlogd. dynamic_ownership stays on so
    // libvirt hands the console log and sockets to the QEMU user.
    std::ofstream conf(root + "/etc/qemu.conf", std::ios::trunc);
    conf << "# written by airlockd\n"
         << "user = \"libvirt-qemu\"\n"
         << "group = \"libvirt-qemu\"\n"
         << "stdio_handler = \"file\"\n"
         << "seccomp_sandbox = 1\n"
         << "remember_owner = 0\n";
}

LibvirtHypervisor::LibvirtHypervisor(const LibvirtOptions& options) : accel_(options.accel) {
    uri_ = options.uri;
    if (uri_.empty()) {
        std::string root = options.dataDir + "/libvirt";
        prepareEmbeddedRoot(root);
        uri_ = "qemu:///embed?root=" + root;
    }
    ensureEventLoop();
    conn_ = virConnectOpen(uri_.c_str());
    if (!conn_) throw Error(ErrorCode::hypervisor_error, "cannot open " + uri_ + ": " + lastLibvirtError());
    // The driver reconnects to domains that survived a previous process in
    // background threads; listing waits until that settled enough to act.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int previous = -1;
    while (std::chrono::steady_clock::now() < deadline) {
        int n = virConnectNumOfDomains(conn_);
        if (n == previous) break;
        previous = n;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    // libvirt probes QEMU's capabilities on first use (seconds under TCG) and
    // caches them in the driver root: pay that at start-up, not in the
    // first client's create.
    auto probeStart = std::chrono::steady_clock::now();
    if (char* caps = virConnectGetDomainCapabilities(conn_, nullptr, "x86_64", "q35",
                                                     accel_ == Accel::kvm ? "kvm" : "qemu", 0)) {
        free(caps);
    } else {
        logWarn("hypervisor", "cannot read domain capabilities: " + lastLibvirtError());
    }
    auto probeMs = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - probeStart);
    logInfo("hypervisor", "connected to " + uri_ + " (accel " + accelName(accel_) + ", capabilities ready in " +
                              std::to_string(probeMs.count()) + " ms)");
}

LibvirtHypervisor::~LibvirtHypervisor() {
    if (conn_) virConnectClose(conn_);
}

void LibvirtHypervisor::startDomain(const DomainSpec& spec) {
    std::string xml = buildDomainXml(spec);
    DomainHandle dom(virDomainCreateXML(conn_, xml.c_str(), 0));
    if (!dom) throw Error(ErrorCode::hypervisor_error, "cannot start " + spec.name + ": " + lastLibvirtError());
}

void LibvirtHypervisor::destroyDomain(const std::string& name) {
    DomainHandle dom(virDomainLookupByName(conn_, name.c_str()));
    if (!dom) return;
    // Graceful would need the guest's cooperation; a sandbox is disposable.
    if (virDomainDestroyFlags(dom.get(), 0) < 0) {
        DomainHandle again(virDomainLookupByName(conn_, name.c_str()));
        if (again && virDomainIsActive(again.get()) == 1)
            throw Error(ErrorCode::hypervisor_error, "cannot destroy " + name + ": " + lastLibvirtError());
    }
    DomainHandle persistent(virDomainLookupByName(conn_, name.c_str()));
    if (persistent && virDomainIsPersistent(persistent.get()) == 1) virDomainUndefine(persistent.get());
}

DomainState LibvirtHypervisor::domainState(const std::string& name) {
    DomainHandle dom(virDomainLookupByName(conn_, name.c_str()));
    if (!dom) return DomainState::missing;
    int state = 0, reason = 0;
    if (virDomainGetState(dom.get(), &state, &reason, 0) < 0) return DomainState::missing;
    switch (state) {
        case VIR_DOMAIN_RUNNING: return DomainState::running;
        case VIR_DOMAIN_PAUSED: return DomainState::paused;
        case VIR_DOMAIN_SHUTOFF: return DomainState::shutoff;
        default: return DomainState::other;
    }
}

std::optional<unsigned> LibvirtHypervisor::vsockCid(const std::string& name) {
    DomainHandle dom(virDomainLookupByName(conn_, name.c_str()));
    if (!dom) return std::nullopt;
    char* xml = virDomainGetXMLDesc(dom.get(), 0);
    if (!xml) return std::nullopt;
    std::string desc(xml);
    free(xml);
    return parseVsockCid(desc);
}

std::vector<std::string> LibvirtHypervisor::listDomains() {
    virDomainPtr* domains = nullptr;
    int n = virConnectListAllDomains(conn_, &domains, 0);
    if (n < 0) throw Error(ErrorCode::hypervisor_error, "cannot list domains: " + lastLibvirtError());
    std::vector<std::string> names;
    for (int i = 0; i < n; ++i) {
        DomainHandle d(domains[i]);
        if (const char* nm = virDomainGetName(d.get())) names.emplace_back(nm);
    }
    free(domains);
    return names;
}

}  // namespace airlock

#include "hypervisor/LibvirtHypervisor.hpp"

#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "core/Error.hpp"
#include "core/Log.hpp"
#include "hypervisor/DomainXml.hpp"
#include "hypervisor/MigrationStream.hpp"

#include <nlohmann/json.hpp>

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
        // libvirt warns on every clone and snapshot that the domain is
        // "tainted" (custom QMP / -incoming, both by design); errors only,
        // unless the operator configured libvirt's logging.
        ::setenv("LIBVIRT_LOG_OUTPUTS", "3:stderr", 0);
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

constexpr auto kMigrationTimeout = std::chrono::seconds(180);

// QMP through libvirt (libvirt-qemu): the migration commands libvirt's own
// save/restore API cannot express (a new UUID per clone, a unix socket).
nlohmann::json qmp(virDomainPtr dom, const nlohmann::json& command) {
    char* reply = nullptr;
    if (virDomainQemuMonitorCommand(dom, command.dump().c_str(), &reply, 0) < 0)
        throw Error(ErrorCode::hypervisor_error,
                    "QMP " + command.value("execute", std::string("?")) + ": " + lastLibvirtError());
    std::string text(reply ? reply : "{}");
    free(reply);
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) throw Error(ErrorCode::hypervisor_error, "QMP reply is not JSON");
    if (j.contains("error"))
        throw Error(ErrorCode::hypervisor_error, "QMP " + command.value("execute", std::string("?")) + ": " +
                                                     j["error"].value("desc", std::string("failed")));
    return j.value("return", nlohmann::json::object());
}

// Polls query-migrate until the stream completed; throws if it failed.
void waitForMigration(virDomainPtr dom, std::chrono::steady_clock::duration timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
        auto status = qmp(dom, {{"execute", "query-migrate"}});
        std::string state = status.value("status", "");
        if (state == "completed") return;
        if (state == "failed" || state == "cancelled")
            throw Error(ErrorCode::hypervisor_error,
                        "migration " + state + ": " + status.value("error-desc", std::string("no reason given")));
        if (std::chrono::steady_clock::now() > deadline)
            throw Error(ErrorCode::hypervisor_error, "migration did not finish (status '" + state + "')");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

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
        embeddedRoot_ = root;
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

void LibvirtHypervisor::suspendDomain(const std::string& name) {
    DomainHandle dom(virDomainLookupByName(conn_, name.c_str()));
    if (!dom) throw Error(ErrorCode::hypervisor_error, "no domain " + name);
    int state = 0, reason = 0;
    if (virDomainGetState(dom.get(), &state, &reason, 0) == 0 && state == VIR_DOMAIN_PAUSED) return;
    if (virDomainSuspend(dom.get()) < 0)
        throw Error(ErrorCode::hypervisor_error, "cannot pause " + name + ": " + lastLibvirtError());
}

void LibvirtHypervisor::resumeDomain(const std::string& name) {
    DomainHandle dom(virDomainLookupByName(conn_, name.c_str()));
    if (!dom) throw Error(ErrorCode::hypervisor_error, "no domain " + name);
    int state = 0, reason = 0;
    if (virDomainGetState(dom.get(), &state, &reason, 0) == 0 && state == VIR_DOMAIN_RUNNING) return;
    if (virDomainResume(dom.get()) < 0)
        throw Error(ErrorCode::hypervisor_error, "cannot resume " + name + ": " + lastLibvirtError());
}

void LibvirtHypervisor::saveState(const std::string& name, const std::string& statePath,
                                  const std::string& scratchDir) {
    DomainHandle dom(virDomainLookupByName(conn_, name.c_str()));
    if (!dom) throw Error(ErrorCode::hypervisor_error, "no domain " + name);
    std::string socketPath = scratchDir + "/migrate-out.sock";
    UniqueFd listener = MigrationStream::listenAt(socketPath);
    std::exception_ptr receiveError;
    std::thread receiver([&] {
        try {
            MigrationStream::receiveToFile(listener.get(), statePath, kMigrationTimeout);
        } catch (...) {
            receiveError = std::current_exception();
        }
    });
    std::exception_ptr migrateError;
    try {
        // The default bandwidth cap (128 MiB/s) is for live migration over a
        // network; a paused guest to a local file should go at disk speed.
        qmp(dom.get(), {{"execute", "migrate-set-parameters"}, {"arguments", {{"max-bandwidth", 1LL << 40}}}});
        qmp(dom.get(), {{"execute", "migrate"}, {"arguments", {{"uri", "unix:" + socketPath}}}});
        waitForMigration(dom.get(), kMigrationTimeout);
    } catch (...) {
        migrateError = std::current_exception();
        // A receiver still waiting for QEMU gets an empty stream instead.
        MigrationStream::wake(socketPath);
    }
    receiver.join();
    ::unlink(socketPath.c_str());
    if (migrateError) std::rethrow_exception(migrateError);
    if (receiveError) std::rethrow_exception(receiveError);
}

void LibvirtHypervisor::loadState(const std::string& name, const std::string& statePath,
                                  const std::string& scratchDir) {
    DomainHandle dom(virDomainLookupByName(conn_, name.c_str()));
    if (!dom) throw Error(ErrorCode::hypervisor_error, "no domain " + name);
    std::string socketPath = scratchDir + "/migrate-in.sock";
    auto t0 = std::chrono::steady_clock::now();
    try {
        qmp(dom.get(), {{"execute", "migrate-incoming"}, {"arguments", {{"uri", "unix:" + socketPath}}}});
        auto sent = MigrationStream::sendFile(socketPath, statePath, std::chrono::seconds(30));
        auto t1 = std::chrono::steady_clock::now();
        waitForMigration(dom.get(), kMigrationTimeout);
        auto ms = [](auto d) { return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()); };
        logDebug("hypervisor", name + ": sent " + std::to_string(sent) + " bytes of state in " + ms(t1 - t0) +
                                   " ms, loaded " + ms(std::chrono::steady_clock::now() - t1) + " ms later");
    } catch (...) {
        ::unlink(socketPath.c_str());
        throw;
    }
    ::unlink(socketPath.c_str());
}

void LibvirtHypervisor::switchDiskOverlay(const std::string& name, const std::string& newOverlay) {
    DomainHandle dom(virDomainLookupByName(conn_, name.c_str()));
    if (!dom) throw Error(ErrorCode::hypervisor_error, "no domain " + name);
    // An external disk-only snapshot onto a file the controller made (its
    // backing is the frozen layer's canonical path); relabel='no' as for the
    // domain's own disk.
    std::string xml = "<domainsnapshot><disks><disk name='vda' snapshot='external' type='file'>"
                      "<driver type='qcow2'/><source file='" +
                      xmlEscape(newOverlay) +
                      "'><seclabel model='dac' relabel='no'/></source></disk></disks></domainsnapshot>";
    unsigned flags = VIR_DOMAIN_SNAPSHOT_CREATE_DISK_ONLY | VIR_DOMAIN_SNAPSHOT_CREATE_NO_METADATA |
                     VIR_DOMAIN_SNAPSHOT_CREATE_REUSE_EXT;
    virDomainSnapshotPtr snap = virDomainSnapshotCreateXML(dom.get(), xml.c_str(), flags);
    if (!snap) throw Error(ErrorCode::hypervisor_error, "cannot switch the disk of " + name + ": " + lastLibvirtError());
    virDomainSnapshotFree(snap);
}

void LibvirtHypervisor::startDomain(const DomainSpec& spec) {
    std::string xml = buildDomainXml(spec);
    // An incoming domain waits paused for its migration stream (loadState).
    DomainHandle dom(virDomainCreateXML(conn_, xml.c_str(), spec.incoming ? VIR_DOMAIN_START_PAUSED : 0));
    if (!dom) throw Error(ErrorCode::hypervisor_error, "cannot start " + spec.name + ": " + lastLibvirtError());
    if (spec.memoryLimitMib > 0) {
        // Set live, not in the XML: at start libvirt would also raise the
        // process's locked-memory limit, which this host refuses.
        virTypedParameter param{};
        std::snprintf(param.field, sizeof param.field, "%s", VIR_DOMAIN_MEMORY_HARD_LIMIT);
        param.type = VIR_TYPED_PARAM_ULLONG;
        param.value.ul = spec.memoryLimitMib * 1024;  // KiB
        if (virDomainSetMemoryParameters(dom.get(), &param, 1, VIR_DOMAIN_AFFECT_LIVE) < 0) {
            std::string why = lastLibvirtError();
            virDomainDestroy(dom.get());
            throw Error(ErrorCode::hypervisor_error, "cannot limit the memory of " + spec.name + ": " + why);
        }
    }
}

void LibvirtHypervisor::destroyDomain(const std::string& name) {
    // libvirt keeps each domain's QEMU log forever; a sandbox leaves nothing.
    struct LogRemover {
        std::string path;
        ~LogRemover() {
            std::error_code ec;
            if (!path.empty()) std::filesystem::remove(path, ec);
        }
    } removeLog{embeddedRoot_.empty() ? embeddedRoot_ : embeddedRoot_ + "/log/qemu/" + name + ".log"};
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

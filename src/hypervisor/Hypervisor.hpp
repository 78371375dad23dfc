#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace airlock {

enum class Accel { kvm, tcg };
std::string accelName(Accel a);

// Everything needed to start one guest. Paths are absolute and must be
// reachable by the unprivileged user QEMU runs as.
struct DomainSpec {
    std::string name;  // unique libvirt domain name
    std::string uuid;
    unsigned vcpus = 1;
    unsigned memoryMib = 256;
    std::string kernelPath;
    std::string initrdPath;
    std::string cmdline;
    std::string consoleLogPath;   // serial console output
    std::string agentSocketPath;  // unix socket QEMU binds for the agent's virtio-serial port
    std::string agentPortName;    // name the guest sees in /sys/class/virtio-ports
    bool vsock = false;           // agent over AF_VSOCK (a vhost-vsock device) instead of virtio-serial
    Accel accel = Accel::tcg;
    // Optional root disk: a qcow2 overlay owned by the QEMU user whose backing
    // chain (template base, snapshot layers) stays root-owned and read-only.
    std::string diskPath;
    // Volumes: raw images after the root disk (vdb, vdc, ...), each with the
    // serial the guest finds it by. Access to the image is the caller's to
    // give the QEMU user (an ACL), never libvirt's relabelling.
    struct Volume {
        std::string path;
        std::string serial;  // at most 20 characters
        bool readOnly = false;
    };
    std::vector<Volume> volumes;
    // Start paused and wait for a migration stream (restore from a snapshot).
    bool incoming = false;
    // The QEMU process's own uid and gid (libvirt's static DAC label, no
    // relabelling); unset: the driver's configured QEMU user.
    std::optional<std::pair<unsigned, unsigned>> runAs;
    // Host resources (0: unlimited). CPU: the whole QEMU process (vCPUs,
    // emulator and I/O threads) gets at most this many percent of one core
    // (cgroup cpu quota). Memory: QEMU's whole footprint (cgroup hard limit,
    // guest RAM plus QEMU's own). I/O: throttling of the root disk in QEMU.
    unsigned cpuQuotaPercent = 0;
    std::uint64_t memoryLimitMib = 0;
    std::uint64_t diskBytesPerSecond = 0;
    std::uint64_t diskOpsPerSecond = 0;
    // Memory levers (docs/performance.md). TCG's translated-code buffer in
    // MiB (not used under KVM); a virtio balloon that only reports the
    // guest's free pages so QEMU hands them back to the host.
    unsigned tcgCacheMib = 16;
    bool freePageReporting = true;
};

enum class DomainState { running, paused, shutoff, missing, other };

// The seam between the controller and whatever runs guests: the libvirt
// backend in production, a fake in unit tests.
class Hypervisor {
public:
    virtual ~Hypervisor() = default;
    virtual Accel accel() const = 0;
    // Starts a transient domain (paused when spec.incoming is set); throws
    // Error(hypervisor_error) on failure.
    virtual void startDomain(const DomainSpec& spec) = 0;
    // Stops the domain for good; succeeds when it does not exist.
    virtual void destroyDomain(const std::string& name) = 0;
    virtual DomainState domainState(const std::string& name) = 0;
    virtual std::vector<std::string> listDomains() = 0;
    virtual void suspendDomain(const std::string& name) = 0;
    virtual void resumeDomain(const std::string& name) = 0;
    // Writes a paused domain's memory and device state to statePath; the
    // domain stays paused. scratchDir must be reachable by the QEMU user.
    virtual void saveState(const std::string& name, const std::string& statePath, const std::string& scratchDir) = 0;
    // Loads statePath into a domain started with spec.incoming (paused,
    // waiting for a migration stream); the domain is left paused.
    virtual void loadState(const std::string& name, const std::string& statePath, const std::string& scratchDir) = 0;
    // startDomain (spec.incoming set) + loadState; on failure nothing remains.
    void restoreDomain(const DomainSpec& spec, const std::string& statePath, const std::string& scratchDir) {
        startDomain(spec);
        try {
            loadState(spec.name, statePath, scratchDir);
        } catch (...) {
            destroyDomain(spec.name);
            throw;
        }
    }
    // Freezes the domain's current disk overlay and continues on newOverlay,
    // a pre-created qcow2 whose backing is a link to the frozen layer.
    virtual void switchDiskOverlay(const std::string& name, const std::string& newOverlay) = 0;
    // Resident memory of the domain's QEMU process, if known.
    virtual std::optional<std::uint64_t> residentBytes(const std::string& /*name*/) { return std::nullopt; }
    // The guest CID of a running domain's vsock device, if it has one.
    virtual std::optional<unsigned> vsockCid(const std::string& /*name*/) { return std::nullopt; }
};

}  // namespace airlock

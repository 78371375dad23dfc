#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "agentclient/AgentTransport.hpp"
#include "controller/TemplateCatalog.hpp"
#include "core/LatencyHistogram.hpp"
#include "hypervisor/Hypervisor.hpp"

namespace airlock {

// What /healthz reports as enforced on every sandbox.
struct EnforcedLimits {
    bool cpuQuota = false;
    std::uint64_t memoryOverheadMib = 0;
    std::uint64_t diskBytesPerSecond = 0, diskOpsPerSecond = 0;
    std::uint64_t minFreeDiskMib = 0;
    bool ownUidPerSandbox = false;
    unsigned tcgCacheMib = 0;  // 0: not TCG
    bool freePageReporting = false;
    std::string memorySharing;
};

// What the host says about itself (/healthz, /v1/templates, /metrics): how
// it runs guests, its templates, its limits and its counters.
class HostStatus {
  public:
    virtual ~HostStatus() = default;
    virtual Accel accel() const = 0;
    virtual AgentTransportKind transport() const = 0;
    virtual const TemplateCatalog& templates() const = 0;
    // A ready snapshot of the template's current digest exists (clones restore it).
    virtual bool hasWarmSnapshot(const std::string& templateName) = 0;
    virtual EnforcedLimits enforcedLimits() const = 0;
    // Create (boot or restore) to a ready agent.
    virtual const LatencyHistogram& createLatency() const = 0;
    // Audit records by type since start (egress decisions, protocol errors...).
    virtual std::map<std::string, std::uint64_t> auditCounts() = 0;
};

}  // namespace airlock

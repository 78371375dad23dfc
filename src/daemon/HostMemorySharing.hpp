#pragma once
#include <map>
#include <string>

namespace airlock {

// Host-side memory settings every QEMU airlockd starts inherits
// (docs/performance.md). With the embedded libvirt driver QEMU is forked
// from airlockd, so two per-process flags set here reach it:
//  * PR_SET_MEMORY_MERGE: all of QEMU's anonymous memory may be merged by
//    KSM (the kernel image QEMU keeps for the guest, not only guest RAM);
//  * PR_SET_THP_DISABLE: no transparent huge pages, which KSM cannot merge
//    and which keep 2 MiB resident for every 4 KiB a guest touches.
// And kernel samepage merging itself: when airlockd may write
// /sys/kernel/mm/ksm and finds it off, it turns it on with a scan rate
// that settles fifty idle guests within about a minute, and puts the
// host's values back when it stops. The host's values are also written to
// a file first, so an airlockd that was killed is finished by the next
// one. A host that already runs KSM keeps its own settings.
class HostMemorySharing {
  public:
    enum class Mode { automatic, off };

    // recordFile: where the host's values wait for their restore
    // (DATA_DIR/ksm-host-settings). ksmDir: /sys/kernel/mm/ksm (a test
    // passes a scratch directory).
    HostMemorySharing(Mode mode, std::string recordFile, std::string ksmDir = "/sys/kernel/mm/ksm",
                      bool setProcessFlags = true);
    ~HostMemorySharing();
    HostMemorySharing(const HostMemorySharing&) = delete;
    HostMemorySharing& operator=(const HostMemorySharing&) = delete;

    // What /healthz reports: "on (airlockd)", "on (host)", "off" or
    // "unavailable (...)".
    const std::string& ksmState() const { return ksmState_; }

  private:
    void enableKsm();
    void restoreKsm() noexcept;

    std::string recordFile_;
    std::string ksmDir_;
    std::string ksmState_ = "off";
    // The host's values of what airlockd changed, written back on exit.
    std::map<std::string, std::string> saved_;
};

}  // namespace airlock

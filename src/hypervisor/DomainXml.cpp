#include "hypervisor/DomainXml.hpp"

#include <sstream>

#include "core/Error.hpp"

namespace airlock {

std::string xmlEscape(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&apos;"; break;
            default: out.push_back(c);
        }
    }
    return out;
}

std::optional<unsigned> parseVsockCid(const std::string& xml) {
    auto vsock = xml.find("<vsock");
    if (vsock == std::string::npos) return std::nullopt;
    auto cid = xml.find("<cid", vsock);
    auto end = xml.find("</vsock>", vsock);
    if (cid == std::string::npos || (end != std::string::npos && cid > end)) return std::nullopt;
    auto addr = xml.find("address='", cid);
    if (addr == std::string::npos || addr > xml.find('>', cid)) return std::nullopt;
    try {
        return static_cast<unsigned>(std::stoul(xml.substr(addr + 9)));
    } catch (...) {
        return std::nullopt;
    }
}

std::string buildDomainXml(const DomainSpec& s) {
    if (s.name.empty() || s.kernelPath.empty() || (s.agentSocketPath.empty() && !s.vsock))
        throw Error(ErrorCode::internal, "domain spec lacks a name, kernel or agent socket");
    if (s.vcpus == 0 || s.memoryMib == 0) throw Error(ErrorCode::internal, "domain spec has no vcpus or memory");
    std::ostringstream x;
    x << "<domain type='" << (s.accel == Accel::kvm ? "kvm" : "qemu") << "'"
      << (s.incoming ? " xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'" : "") << ">\n"
      << "  <name>" << xmlEscape(s.name) << "</name>\n";
    if (!s.uuid.empty()) x << "  <uuid>" << xmlEscape(s.uuid) << "</uuid>\n";
    x << "  <memory unit='MiB'>" << s.memoryMib << "</memory>\n"
      << "  <vcpu>" << s.vcpus << "</vcpu>\n";
    if (s.cpuQuotaPercent > 0)
        // global_*: one quota for the whole process, so a guest cannot use
        // more than its vcpus' worth of host CPU through emulator threads.
        x << "  <cputune>\n"
          << "    <global_period>100000</global_period>\n"
          << "    <global_quota>" << std::uint64_t(s.cpuQuotaPercent) * 1000 << "</global_quota>\n"
          << "  </cputune>\n";
    x
      << "  <os>\n"
      << "    <type arch='x86_64' machine='q35'>hvm</type>\n"
      << "    <kernel>" << xmlEscape(s.kernelPath) << "</kernel>\n";
    if (!s.initrdPath.empty()) x << "    <initrd>" << xmlEscape(s.initrdPath) << "</initrd>\n";
    x << "    <cmdline>" << xmlEscape(s.cmdline) << "</cmdline>\n"
      << "  </os>\n"
      << "  <features><acpi/>";
    // TCG's translated-code buffer is QEMU memory outside the guest's, and
    // a guest touches all of it within its boot (a full buffer is flushed
    // and refilled, not an error): its default (1 GiB) lets a JIT-heavy
    // guest grow QEMU past the memory cap and be OOM-killed, and every MiB
    // of it is a MiB per sandbox no other sandbox shares. The size is the
    // daemon's --tcg-cache-mib; docs/performance.md has the trade-off.
    if (s.accel != Accel::kvm && s.tcgCacheMib > 0)
        x << "<tcg><tb-cache unit='MiB'>" << s.tcgCacheMib << "</tb-cache></tcg>";
    x << "</features>\n";
    // check='none': otherwise libvirt verifies the guest CPU feature by
    // feature after start (about 400 QMP round trips, half a second per
    // start under TCG). The model is fixed so that snapshots restore anywhere.
    if (s.accel == Accel::kvm)
        x << "  <cpu mode='host-passthrough' check='none'/>\n";
    else
        x << "  <cpu mode='custom' match='exact' check='none'><model fallback='forbid'>qemu64</model></cpu>\n";
    x << "  <clock offset='utc'/>\n"
      << "  <on_poweroff>destroy</on_poweroff>\n"
      << "  <on_reboot>destroy</on_reboot>\n"
      << "  <on_crash>destroy</on_crash>\n"
      << "  <devices>\n"
      << "    <controller type='usb' model='none'/>\n"
      ;
    // Free page reporting: the guest tells QEMU which pages it freed (2 MiB
    // at a time) and QEMU discards them, so memory a guest touched once
    // (boot, a finished build) returns to the host. The balloon is never
    // inflated: the guest always keeps its whole memory.
    if (s.freePageReporting)
        x << "    <memballoon model='virtio' freePageReporting='on'/>\n";
    else
        x << "    <memballoon model='none'/>\n";
    if (!s.diskPath.empty()) {
        // relabel='no': libvirt would otherwise chown the whole backing chain
        // (the shared template base, snapshot layers) to the QEMU user. The
        // controller hands the overlay alone to that user.
        x << "    <disk type='file' device='disk'>\n"
          << "      <driver name='qemu' type='qcow2' discard='unmap'/>\n"
          << "      <source file='" << xmlEscape(s.diskPath) << "'>\n";
        // (With a static label relabelling is off for the whole domain.)
        if (!s.runAs) x << "        <seclabel model='dac' relabel='no'/>\n";
        x << "      </source>\n"
          << "      <target dev='vda' bus='virtio'/>\n";
        if (s.diskBytesPerSecond > 0 || s.diskOpsPerSecond > 0) {
            x << "      <iotune>\n";
            if (s.diskBytesPerSecond > 0) x << "        <total_bytes_sec>" << s.diskBytesPerSecond << "</total_bytes_sec>\n";
            if (s.diskOpsPerSecond > 0) x << "        <total_iops_sec>" << s.diskOpsPerSecond << "</total_iops_sec>\n";
            x << "      </iotune>\n";
        }
        x
          << "    </disk>\n";
    }
    char dev = s.diskPath.empty() ? 'a' : 'b';
    for (const auto& v : s.volumes) {
        x << "    <disk type='file' device='disk'>\n"
          << "      <driver name='qemu' type='raw' discard='unmap'/>\n"
          << "      <source file='" << xmlEscape(v.path) << "'>\n";
        if (!s.runAs) x << "        <seclabel model='dac' relabel='no'/>\n";
        x << "      </source>\n"
          << "      <target dev='vd" << dev++ << "' bus='virtio'/>\n"
          << "      <serial>" << xmlEscape(v.serial) << "</serial>\n";
        if (v.readOnly) x << "      <readonly/>\n";
        x << "    </disk>\n";
    }
    if (!s.consoleLogPath.empty())
        x << "    <serial type='file'>\n"
          << "      <source path='" << xmlEscape(s.consoleLogPath) << "'/>\n"
          << "      <target port='0'/>\n"
          << "    </serial>\n";
    if (s.vsock) {
        // The agent listens on vsock; the host connects to the CID libvirt assigns.
        x << "    <vsock model='virtio'>\n"
          << "      <cid auto='yes'/>\n"
          << "    </vsock>\n";
    } else {
        x << "    <channel type='unix'>\n"
          << "      <source mode='bind' path='" << xmlEscape(s.agentSocketPath) << "'/>\n"
          << "      <target type='virtio' name='" << xmlEscape(s.agentPortName) << "'/>\n"
          << "    </channel>\n";
    }
    x << "    <rng model='virtio'>\n"
      << "      <backend model='random'>/dev/urandom</backend>\n"
      << "    </rng>\n"
      << "  </devices>\n";
    if (s.runAs) {
        // Its own uid, as Firecracker's jailer gives each microVM: what this
        // QEMU can open is its sandbox's directory and the world-readable
        // templates, nothing of another sandbox. relabel='no': the controller
        // owns every file's ownership (libvirt would chown shared files).
        x << "  <seclabel type='static' model='dac' relabel='no'>\n"
          << "    <label>+" << s.runAs->first << ":+" << s.runAs->second << "</label>\n"
          << "  </seclabel>\n";
    }
    if (s.incoming) {
        // libvirt's own restore refuses a new UUID, so clones load their
        // state through a deferred incoming migration (docs/internals.md,
        // "Pause, snapshots, clones").
        x << "  <qemu:commandline>\n"
          << "    <qemu:arg value='-incoming'/>\n"
          << "    <qemu:arg value='defer'/>\n"
          << "  </qemu:commandline>\n";
    }
    x << "</domain>\n";
    return x.str();
}

}  // namespace airlock

#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "controller/CreateSandboxRequest.hpp"
#include "controller/UidPool.hpp"
#include "core/KeyedMutexes.hpp"
#include "hypervisor/Hypervisor.hpp"
#include "store/SandboxStore.hpp"
#include "store/VolumeStore.hpp"
#include "volumes/VolumeImage.hpp"

namespace airlock {

class TenantLimits;

// A volume a sandbox mounts: which (its id and name), where in the guest,
// and whether it may write.
struct VolumeMount {
    std::string volume;  // vol-…
    std::string name;
    std::string path;
    bool readOnly = false;
};
std::vector<VolumeMount> volumeMountsFrom(const std::string& json);
std::string volumeMountsJson(const std::vector<VolumeMount>& mounts);

struct VolumeAttachment {
    std::string sandbox;
    std::string path;
    bool readOnly = false;
};

struct VolumeInfo {
    VolumeRecord record;
    std::uint64_t usedBytes = 0;
    std::vector<VolumeAttachment> attachments;
};

// Tenants' volumes: ext4 images under the data dir, made, grown and removed
// here, attached to sandboxes (one writer, or any number of readers), and
// read or written on the host while no guest writes them (VolumeImage:
// e2fsprogs on the image, never a mount, run as a uid of its own).
class SandboxVolumes {
  public:
    static constexpr std::size_t kMaxPerSandbox = 8;
    static constexpr unsigned kGuestUid = 1000;  // the templates' sandbox user

    // requireFreeSpace(what, bytes): throws when the data dir cannot take
    // `bytes` more above its floor (none: no floor).
    using FreeSpaceCheck = std::function<void(const std::string& what, std::uint64_t bytes)>;
    SandboxVolumes(std::string dataDir, VolumeStore& store, SandboxStore& sandboxes,
                   TenantLimits& limits, UidPool& uids, unsigned maxSizeGib,
                   std::string qemuUser, FreeSpaceCheck requireFreeSpace = nullptr);

    VolumeInfo create(const std::string& tenant, const std::string& name, unsigned sizeGib,
                      const std::string& filesystem);
    VolumeInfo get(const std::string& tenant, const std::string& name);
    std::vector<VolumeInfo> list(const std::string& tenant);
    VolumeInfo grow(const std::string& tenant, const std::string& name, unsigned sizeGib);
    void remove(const std::string& tenant, const std::string& name);
    // How many volumes and GiB a tenant holds (its quota's figures).
    std::pair<std::uint64_t, std::uint64_t> usageOf(const std::string& tenant);

    // Files of a volume no guest writes (409 while one does). readPath: what
    // is at a path, in one look under the volume's lock: a directory's
    // entries, or a file whose bytes are copied to `out` (a host descriptor:
    // the caller streams them from there, with no lock held).
    struct PathRead {
        VolumeStat stat;
        std::vector<VolumeEntry> entries;  // a directory's
    };
    PathRead readPath(const std::string& tenant, const std::string& name, const std::string& path,
                      int out);
    // Before an upload is staged: the volume exists, nothing holds it that
    // would refuse the write, and its capacity (what a file may not pass).
    std::uint64_t prepareUpload(const std::string& tenant, const std::string& name);
    // Throws insufficient_storage when staging `bytes` more would pass the floor.
    void requireStagingSpace(std::uint64_t bytes) { requireFreeSpace_("a volume file", bytes); }
    // A file written from a host file (made the sandbox user's); a path removed.
    void writeFile(const std::string& tenant, const std::string& name, const std::string& path,
                   const std::string& hostFile);
    void removeFile(const std::string& tenant, const std::string& name, const std::string& path);
    // Where an upload is staged before writeFile (readable by the tool's uid).
    std::string stagingDir() const { return dataDir_ + "/volumes/.staging"; }

    // Attachments. Held while a create checks and records its mounts: two
    // creates cannot both take a volume's one writer.
    std::unique_lock<std::mutex> attachLock() { return std::unique_lock(attachMutex_); }
    // A create's mounts, resolved and checked against who holds each volume
    // now (Error(conflict) naming the holder; Error(not_found) for a name the
    // tenant has no volume of; Error(bad_request) for a bad path).
    std::vector<VolumeMount> resolve(const std::string& tenant,
                                     const std::vector<VolumeRequest>& requested);
    // A clone's mounts: its snapshot's, checked as a create's are.
    std::vector<VolumeMount> recheck(const std::string& tenant,
                                     const std::vector<VolumeMount>& mounts);
    // The disks a sandbox's domain gets, its QEMU uid given access first.
    std::vector<DomainSpec::Volume> domainVolumes(const SandboxRecord& r, unsigned qemuUid);
    // After a sandbox is gone: its QEMU uid loses access to its volumes.
    void released(const std::vector<VolumeMount>& mounts);
    // Guest scripts (run as root by the agent): mount each volume at its
    // path; unmount them (a snapshot's, a delete's: what the page cache holds
    // reaches the image).
    static std::string mountScript(const std::vector<VolumeMount>& mounts);
    static std::string unmountScript(const std::vector<VolumeMount>& mounts);
    // The guest path rule: absolute, normalized, not a system directory.
    static std::string checkGuestPath(const std::string& path);

    std::string imagePath(const std::string& volumeId) const;

  private:
    VolumeRecord require(const std::string& tenant, const std::string& name);
    std::vector<VolumeAttachment> attachmentsOf(const std::string& volumeId);
    // Every held volume's attachments, from one read of the sandboxes.
    std::map<std::string, std::vector<VolumeAttachment>> attachments();
    VolumeInfo info(const VolumeRecord& v);
    VolumeInfo info(const VolumeRecord& v, std::vector<VolumeAttachment> attached);
    // Gives every QEMU uid that holds the volume access (read, or read and
    // write) through the image's ACL, and nobody else.
    void grantAccess(const std::string& volumeId);
    // Runs fn with the image opened by the tool (the volume's lock held, no
    // guest writing it, the image handed to a uid of the pool meanwhile).
    template <typename F>
    auto withImage(const std::string& tenant, const std::string& name, bool writes, F fn);

    std::string dataDir_;
    VolumeStore& store_;
    SandboxStore& sandboxes_;
    TenantLimits& limits_;
    UidPool& uids_;
    unsigned maxSizeGib_;
    std::string qemuUser_;  // QEMU's user where a sandbox has no uid of its own
    FreeSpaceCheck requireFreeSpace_;
    std::mutex aclMutex_;
    static constexpr std::uint32_t kNobody = 65534;
    std::mutex attachMutex_;
    std::set<std::string> busy_;  // volumes a host tool has now (under attachMutex_)
    // Marks a volume busy (attachMutex_ held) until the token goes.
    std::shared_ptr<void> markBusy(const std::string& volumeId);
    KeyedMutexes volumeLocks_;
};

}  // namespace airlock

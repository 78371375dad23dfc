#include "controller/SandboxVolumes.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "controller/DiskLayers.hpp"
#include "controller/TenantLimits.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"
#include "core/ShellQuote.hpp"
#include "core/SafeFs.hpp"
#include "store/SnapshotStore.hpp"

namespace airlock {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool validVolumeName(const std::string& n) {
    if (n.empty() || n.size() > 64) return false;
    return std::all_of(n.begin(), n.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    });
}

// A sandbox holds its volumes from its create until it is gone.
bool holds(const SandboxRecord& r) {
    return r.state == SandboxState::creating || r.state == SandboxState::running ||
           r.state == SandboxState::paused || r.state == SandboxState::deleting;
}

// The POSIX ACL xattr (system.posix_acl_access, version 2): the owner (root)
// reads and writes, each listed uid reads (and writes), nobody else.
void writeAcl(const std::string& path, const std::map<unsigned, bool>& uids) {
    struct Entry {
        std::uint16_t tag, perm;
        std::uint32_t id;
    };
    constexpr std::uint16_t kUserObj = 0x01, kUser = 0x02, kGroupObj = 0x04, kMask = 0x10,
                            kOther = 0x20;
    constexpr std::uint32_t kUndefined = 0xFFFFFFFF;
    std::vector<Entry> entries{{kUserObj, 6, kUndefined}};
    bool anyWriter = false;
    for (const auto& [uid, write] : uids) {
        entries.push_back({kUser, static_cast<std::uint16_t>(write ? 6 : 4), uid});
        anyWriter = anyWriter || write;
    }
    entries.push_back({kGroupObj, 0, kUndefined});
    if (!uids.empty()) entries.push_back({kMask, static_cast<std::uint16_t>(anyWriter ? 6 : 4), kUndefined});
    entries.push_back({kOther, 0, kUndefined});
    std::string buf(4 + entries.size() * 8, '\0');
    std::uint32_t version = 2;  // little-endian on every host airlockd runs on
    std::memcpy(buf.data(), &version, 4);
    for (std::size_t i = 0; i < entries.size(); ++i)
        std::memcpy(buf.data() + 4 + i * 8, &entries[i], 8);
    if (uids.empty()) {
        ::removexattr(path.c_str(), "system.posix_acl_access");
        ::chmod(path.c_str(), 0600);
        return;
    }
    if (::setxattr(path.c_str(), "system.posix_acl_access", buf.data(), buf.size(), 0) != 0)
        throw Error(ErrorCode::internal, "cannot give QEMU access to " + path +
                                             " (ACLs on the data dir's filesystem?): " +
                                             std::strerror(errno));
}

}  // namespace

std::vector<VolumeMount> volumeMountsFrom(const std::string& text) {
    std::vector<VolumeMount> out;
    if (text.empty()) return out;
    auto j = json::parse(text, nullptr, false);
    if (!j.is_array()) return out;
    for (const auto& m : j) {
        if (!m.is_object()) continue;
        out.push_back(VolumeMount{m.value("volume", ""), m.value("name", ""), m.value("path", ""),
                                  m.value("read_only", false)});
    }
    return out;
}

std::string volumeMountsJson(const std::vector<VolumeMount>& mounts) {
    if (mounts.empty()) return "";
    json out = json::array();
    for (const auto& m : mounts)
        out.push_back({{"volume", m.volume},
                       {"name", m.name},
                       {"path", m.path},
                       {"read_only", m.readOnly}});
    return out.dump();
}

SandboxVolumes::SandboxVolumes(std::string dataDir, VolumeStore& store, SandboxStore& sandboxes,
                               TenantLimits& limits, UidPool& uids, unsigned maxSizeGib,
                               std::string qemuUser, FreeSpaceCheck requireFreeSpace)
    : dataDir_(std::move(dataDir)),
      store_(store),
      sandboxes_(sandboxes),
      limits_(limits),
      uids_(uids),
      maxSizeGib_(maxSizeGib),
      qemuUser_(std::move(qemuUser)),
      requireFreeSpace_(std::move(requireFreeSpace)) {
    if (!requireFreeSpace_) requireFreeSpace_ = [](const std::string&, std::uint64_t) {};
    std::error_code ec;
    fs::create_directories(dataDir_ + "/volumes/.staging", ec);
    // QEMU reaches an image by its path: it may pass through, never list.
    ::chmod((dataDir_ + "/volumes").c_str(), 0711);
    ::chmod(stagingDir().c_str(), 0711);
    // A tool run cut short by a crash left its image with a pool uid.
    if (::geteuid() == 0)
        for (const auto& v : store_.all())
            if (::chown(imagePath(v.id).c_str(), 0, 0) != 0 && errno != ENOENT)
                logWarn("volumes", "cannot hand " + imagePath(v.id) + " back to root");
    // Uploads staged before a crash.
    std::error_code ignored;
    for (const auto& e : fs::directory_iterator(stagingDir(), ignored)) fs::remove(e.path(), ignored);
}

std::string SandboxVolumes::imagePath(const std::string& volumeId) const {
    return dataDir_ + "/volumes/" + volumeId + "/volume.img";
}

std::string SandboxVolumes::checkGuestPath(const std::string& path) {
    if (path.empty() || path[0] != '/')
        throw Error(ErrorCode::bad_request, "a volume's 'path' must be absolute ('" + path + "')");
    if (path.size() > 512) throw Error(ErrorCode::bad_request, "a volume's 'path' is too long");
    std::string norm;
    std::size_t i = 0;
    while (i < path.size()) {
        std::size_t j = path.find('/', i);
        if (j == std::string::npos) j = path.size();
        std::string part = path.substr(i, j - i);
        i = j + 1;
        if (part.empty() || part == ".") continue;
        if (part == "..")
            throw Error(ErrorCode::bad_request, "a volume's 'path' may not contain '..'");
        for (char c : part)
            if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
                  c == '_' || c == '@' || c == '+'))
                throw Error(ErrorCode::bad_request,
                            "a volume's 'path' is letters, digits and . - _ @ + between slashes ('" +
                                path + "')");
        norm += "/" + part;
    }
    static const char* kSystem[] = {"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64",
                                    "/proc", "/root", "/run", "/sbin", "/sys", "/usr", "/var/lib"};
    if (norm.empty())
        throw Error(ErrorCode::bad_request, "a volume cannot be mounted at '/'");
    for (const char* sys : kSystem) {
        std::string s = sys;
        if (norm == s || norm.rfind(s + "/", 0) == 0)
            throw Error(ErrorCode::bad_request, "a volume cannot be mounted at " + norm +
                                                    " (under the guest's system directory " + s +
                                                    ")");
    }
    if (norm == "/home" || norm == "/tmp" || norm == "/var" || norm == "/mnt")
        throw Error(ErrorCode::bad_request,
                    "a volume cannot be mounted over " + norm + " itself: name a directory in it");
    return norm;
}

VolumeRecord SandboxVolumes::require(const std::string& tenant, const std::string& name) {
    auto v = store_.find(tenant, name);
    if (!v) throw Error(ErrorCode::not_found, "no volume named '" + name + "'");
    return *v;
}

std::map<std::string, std::vector<VolumeAttachment>> SandboxVolumes::attachments() {
    std::map<std::string, std::vector<VolumeAttachment>> out;
    for (const auto& r : sandboxes_.list(TenantScope::all())) {
        if (r.volumesJson.empty() || !holds(r)) continue;
        for (const auto& m : volumeMountsFrom(r.volumesJson))
            out[m.volume].push_back({r.id, m.path, m.readOnly});
    }
    return out;
}

std::vector<VolumeAttachment> SandboxVolumes::attachmentsOf(const std::string& volumeId) {
    auto all = attachments();
    auto it = all.find(volumeId);
    return it == all.end() ? std::vector<VolumeAttachment>{} : std::move(it->second);
}

VolumeInfo SandboxVolumes::info(const VolumeRecord& v, std::vector<VolumeAttachment> attached) {
    VolumeInfo i;
    i.record = v;
    try {
        i.usedBytes = VolumeImage::usedBytes(imagePath(v.id));
    } catch (const Error&) {
        i.usedBytes = 0;  // still being made, or being removed
    }
    i.attachments = std::move(attached);
    return i;
}

VolumeInfo SandboxVolumes::info(const VolumeRecord& v) { return info(v, attachmentsOf(v.id)); }

template <typename F>
auto SandboxVolumes::withImage(const std::string& tenant, const std::string& name, bool writes,
                               F fn) {
    auto lock = volumeLocks_.of(require(tenant, name).id);
    std::lock_guard held(*lock);
    auto v = require(tenant, name);  // again, under its lock: a delete may have won
    bool attached = false;
    std::shared_ptr<void> busy;
    {
        auto attach = attachLock();
        if (busy_.count(v.id))
            throw Error(ErrorCode::conflict,
                        "volume '" + name + "' is being made or used; try again shortly");
        for (const auto& a : attachmentsOf(v.id)) {
            if (!a.readOnly)
                throw Error(ErrorCode::conflict, "volume '" + name + "' is attached read-write to " +
                                                     a.sandbox +
                                                     ": its files are reached through that sandbox");
            if (writes)
                throw Error(ErrorCode::conflict, "volume '" + name + "' is attached to " +
                                                     a.sandbox +
                                                     ": it is written here only while detached");
            attached = true;
        }
        busy = markBusy(v.id);  // no create attaches it while the tool has it
    }
    // The tool runs as a uid of its own that owns the image meanwhile:
    // e2fsprogs reads what a guest's root wrote, with no rights beyond it.
    std::string path = imagePath(v.id);
    struct Lease {
        UidPool& pool;
        std::optional<std::uint32_t> uid;
        std::string path;
        ~Lease() {
            if (!uid) return;
            if (::chown(path.c_str(), 0, 0) != 0 && errno != ENOENT)
                logWarn("volumes", "cannot hand " + path + " back to root");
            // Nothing a hijacked tool started outlives it (ToolRunner: a PID
            // namespace of its own), so the uid is free for another QEMU.
            if (pool.enabled()) pool.release(*uid);
        }
    } lease{uids_, std::nullopt, path};
    ToolUser user;
    if (::geteuid() == 0) {
        // Without a pool: nobody, never root.
        lease.uid = uids_.enabled() ? uids_.acquire() : kNobody;
        user = ToolUser{*lease.uid, *lease.uid, true};
        if (::chown(path.c_str(), *lease.uid, *lease.uid) != 0)
            throw Error(ErrorCode::internal, "cannot hand volume '" + name + "' to the volume tool");
    }
    VolumeImage image(path, user);
    // A guest killed with the volume mounted left its journal; never replayed
    // under a reader's mount.
    if (!attached) image.recoverJournal();
    return fn(image);
}

std::pair<std::uint64_t, std::uint64_t> SandboxVolumes::usageOf(const std::string& tenant) {
    std::uint64_t count = 0, gib = 0;
    for (const auto& v : store_.list(tenant)) {
        ++count;
        gib += v.sizeBytes / kGiB;
    }
    return {count, gib};
}

VolumeInfo SandboxVolumes::create(const std::string& tenant, const std::string& name,
                                  unsigned sizeGib, const std::string& filesystem) {
    if (!validVolumeName(name))
        throw Error(ErrorCode::bad_request, "a volume name is 1 to 64 of a-z, 0-9, '-' and '_'");
    if (filesystem != "ext4")
        throw Error(ErrorCode::bad_request,
                    "'filesystem' '" + filesystem + "' is not supported (ext4 is)");
    if (sizeGib < 1 || sizeGib > maxSizeGib_)
        throw Error(ErrorCode::bad_request,
                    "'size_gib' must be between 1 and " + std::to_string(maxSizeGib_));
    VolumeRecord v;
    std::shared_ptr<void> beingMade;
    v.id = newId("vol-");
    v.tenant = tenant;
    v.name = name;
    v.sizeBytes = sizeGib * kGiB;
    v.filesystem = filesystem;
    v.createdAt = nowTimestamp();
    {
        auto quota = limits_.quotaLock(tenant);
        std::lock_guard counted(*quota);  // checked and recorded in one step
        limits_.requireVolumeQuota(tenant, 1, sizeGib);
        if (store_.find(tenant, name))
            throw Error(ErrorCode::conflict, "a volume named '" + name + "' exists");
        auto attach = attachLock();
        if (!store_.insert(v))
            throw Error(ErrorCode::conflict, "a volume named '" + name + "' exists");
        beingMade = markBusy(v.id);  // nothing attaches it before its filesystem is made
    }
    std::string dir = dataDir_ + "/volumes/" + v.id;
    try {
        requireFreeSpace_("a volume", v.sizeBytes);
        if (::mkdir(dir.c_str(), 0711) != 0)
            throw Error(ErrorCode::internal, "cannot create " + dir + ": " + std::strerror(errno));
        VolumeImage::format(imagePath(v.id), v.sizeBytes, kGuestUid, kGuestUid);
    } catch (...) {
        store_.remove(v.id);
        std::error_code ec;
        fs::remove_all(dir, ec);
        throw;
    }
    logInfo("volumes", "volume " + v.id + " (" + tenant + "/" + name + ", " +
                           std::to_string(sizeGib) + " GiB) created");
    return info(v);
}

VolumeInfo SandboxVolumes::get(const std::string& tenant, const std::string& name) {
    return info(require(tenant, name));
}

std::vector<VolumeInfo> SandboxVolumes::list(const std::string& tenant) {
    std::vector<VolumeInfo> out;
    auto attached = attachments();  // one read of the sandboxes for the whole list
    for (const auto& v : store_.list(tenant)) out.push_back(info(v, std::move(attached[v.id])));
    return out;
}

VolumeInfo SandboxVolumes::grow(const std::string& tenant, const std::string& name,
                                unsigned sizeGib) {
    if (sizeGib > maxSizeGib_)
        throw Error(ErrorCode::bad_request,
                    "'size_gib' must be at most " + std::to_string(maxSizeGib_));
    std::uint64_t bytes = static_cast<std::uint64_t>(sizeGib) * kGiB;
    // Under the volume's lock, with no sandbox holding it (withImage).
    withImage(tenant, name, true, [&](VolumeImage& image) {
        auto v = require(tenant, name);
        if (bytes < v.sizeBytes)
            throw Error(ErrorCode::bad_request, "a volume only grows (it has " +
                                                    std::to_string(v.sizeBytes / kGiB) + " GiB)");
        if (bytes == v.sizeBytes) return;
        requireFreeSpace_("a volume's growth", bytes - v.sizeBytes);
        {
            auto quota = limits_.quotaLock(tenant);
            std::lock_guard counted(*quota);
            limits_.requireVolumeQuota(tenant, 0, sizeGib - v.sizeBytes / kGiB);
            store_.updateSize(v.id, bytes);
        }
        try {
            image.grow(bytes);
        } catch (...) {
            store_.updateSize(v.id, v.sizeBytes);
            throw;
        }
        logInfo("volumes", "volume " + v.id + " grown to " + std::to_string(sizeGib) + " GiB");
    });
    return info(require(tenant, name));
}

void SandboxVolumes::remove(const std::string& tenant, const std::string& name) {
    auto v = require(tenant, name);
    auto lock = volumeLocks_.of(v.id);
    std::lock_guard held(*lock);
    auto attach = attachLock();
    if (auto a = attachmentsOf(v.id); !a.empty())
        throw Error(ErrorCode::conflict, "volume '" + name + "' is attached to " + a[0].sandbox +
                                             (a.size() > 1 ? " and " + std::to_string(a.size() - 1) +
                                                                 " more"
                                                           : "") +
                                             ": delete or detach those sandboxes first");
    store_.remove(v.id);
    std::error_code ec;
    fs::remove_all(dataDir_ + "/volumes/" + v.id, ec);
    if (ec) logWarn("volumes", "volume " + v.id + " left files behind: " + ec.message());
    volumeLocks_.forget(v.id);
    logInfo("volumes", "volume " + v.id + " (" + tenant + "/" + name + ") deleted");
}

std::shared_ptr<void> SandboxVolumes::markBusy(const std::string& volumeId) {
    busy_.insert(volumeId);
    return std::shared_ptr<void>(nullptr, [this, volumeId](void*) {
        auto attach = attachLock();
        busy_.erase(volumeId);
    });
}

SandboxVolumes::PathRead SandboxVolumes::readPath(const std::string& tenant,
                                                  const std::string& name,
                                                  const std::string& path, int out) {
    return withImage(tenant, name, false, [&](VolumeImage& image) {
        PathRead r;
        r.stat = image.stat(path);
        if (r.stat.type == "dir") {
            r.entries = image.list(path);
            return r;
        }
        if (r.stat.type != "file")
            throw Error(ErrorCode::bad_request, path + " is not a regular file or a directory");
        requireFreeSpace_("a volume file", r.stat.size);
        std::uint64_t copied = 0;
        bool failed = false;
        image.read(path, [&](std::string_view chunk) {
            // The size read first bounds the copy: a file that grew is cut.
            if (copied + chunk.size() > r.stat.size) return false;
            copied += chunk.size();
            while (!chunk.empty()) {
                ssize_t n = ::write(out, chunk.data(), chunk.size());
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) {
                    failed = true;
                    return false;
                }
                chunk.remove_prefix(static_cast<std::size_t>(n));
            }
            return true;
        });
        if (failed) throw Error(ErrorCode::insufficient_storage, "cannot stage " + path);
        if (copied != r.stat.size)
            throw Error(ErrorCode::conflict, path + " changed while it was read; read it again");
        return r;
    });
}

std::uint64_t SandboxVolumes::prepareUpload(const std::string& tenant, const std::string& name) {
    auto v = require(tenant, name);
    auto attach = attachLock();
    for (const auto& a : attachmentsOf(v.id))
        throw Error(ErrorCode::conflict, "volume '" + name + "' is attached to " + a.sandbox +
                                             ": it is written here only while detached");
    return v.sizeBytes;
}

void SandboxVolumes::writeFile(const std::string& tenant, const std::string& name,
                               const std::string& path, const std::string& hostFile) {
    withImage(tenant, name, true, [&](VolumeImage& image) {
        image.write(path, hostFile, kGuestUid, kGuestUid);
    });
}

void SandboxVolumes::removeFile(const std::string& tenant, const std::string& name,
                                const std::string& path) {
    withImage(tenant, name, true, [&](VolumeImage& image) { image.remove(path); });
}

std::vector<VolumeMount> SandboxVolumes::resolve(const std::string& tenant,
                                                 const std::vector<VolumeRequest>& requested) {
    std::vector<VolumeMount> mounts;
    if (requested.size() > kMaxPerSandbox)
        throw Error(ErrorCode::bad_request,
                    "a sandbox mounts at most " + std::to_string(kMaxPerSandbox) + " volumes");
    for (const auto& q : requested) {
        auto v = require(tenant, q.name);
        std::string path = checkGuestPath(q.path);
        for (const auto& m : mounts) {
            if (m.volume == v.id)
                throw Error(ErrorCode::bad_request, "volume '" + q.name + "' is named twice");
            if (m.path == path || path.rfind(m.path + "/", 0) == 0 ||
                m.path.rfind(path + "/", 0) == 0)
                throw Error(ErrorCode::bad_request,
                            "volume paths " + m.path + " and " + path + " overlap");
        }
        mounts.push_back(VolumeMount{v.id, v.name, path, q.readOnly});
    }
    return recheck(tenant, mounts);
}

std::vector<VolumeMount> SandboxVolumes::recheck(const std::string& tenant,
                                                 const std::vector<VolumeMount>& mounts) {
    for (const auto& m : mounts) {
        auto v = store_.findById(m.volume);
        if (!v || v->tenant != tenant)
            throw Error(ErrorCode::conflict, "volume '" + m.name + "' no longer exists");
        if (busy_.count(m.volume))
            throw Error(ErrorCode::conflict, "volume '" + m.name +
                                                 "' is being read or written through the API; try "
                                                 "again when that ends");
        for (const auto& a : attachmentsOf(m.volume)) {
            if (!a.readOnly)
                throw Error(ErrorCode::conflict, "volume '" + m.name +
                                                     "' is attached read-write to sandbox " +
                                                     a.sandbox + " (one writer at a time)");
            if (!m.readOnly)
                throw Error(ErrorCode::conflict,
                            "volume '" + m.name + "' is attached read-only to sandbox " +
                                a.sandbox +
                                ": a writer needs it detached everywhere (or attach it read_only)");
        }
    }
    return mounts;
}

void SandboxVolumes::grantAccess(const std::string& volumeId) {
    if (::geteuid() != 0) return;  // unprivileged: QEMU runs as this user
    std::lock_guard one(aclMutex_);  // read and written as one: never an older list last
    std::map<unsigned, bool> uids;
    for (const auto& r : sandboxes_.list(TenantScope::all())) {
        if (r.volumesJson.empty() || !holds(r)) continue;
        for (const auto& m : volumeMountsFrom(r.volumesJson)) {
            if (m.volume != volumeId) continue;
            unsigned uid = static_cast<unsigned>(r.qemuUid);
            if (uid == 0) {
                passwd* pw = ::getpwnam(qemuUser_.c_str());
                if (!pw) continue;
                uid = pw->pw_uid;
            }
            uids[uid] = uids[uid] || !m.readOnly;
        }
    }
    writeAcl(imagePath(volumeId), uids);
}

std::vector<DomainSpec::Volume> SandboxVolumes::domainVolumes(const SandboxRecord& r, unsigned) {
    std::vector<DomainSpec::Volume> out;
    for (const auto& m : volumeMountsFrom(r.volumesJson)) {
        grantAccess(m.volume);
        out.push_back(DomainSpec::Volume{imagePath(m.volume), m.volume.substr(0, 20), m.readOnly});
    }
    return out;
}

void SandboxVolumes::released(const std::vector<VolumeMount>& mounts) {
    for (const auto& m : mounts) {
        try {
            if (store_.findById(m.volume)) grantAccess(m.volume);
        } catch (const std::exception& e) {
            logWarn("volumes", "access to " + m.volume + " not taken back: " + e.what());
        }
    }
}

std::string SandboxVolumes::mountScript(const std::vector<VolumeMount>& mounts) {
    // Each disk is found by its serial (virtio-blk shows it in sysfs).
    std::string s =
        "set -e\n"
        "vol() { dev=; for d in /sys/block/vd*; do [ \"$(cat \"$d/serial\" 2>/dev/null)\" = "
        "\"$1\" ] && dev=/dev/${d##*/}; done\n"
        "  [ -n \"$dev\" ] || { echo \"the disk of volume $1 is not in the guest\" >&2; exit 3; }\n"
        "  mkdir -p \"$2\"\n"
        "  if grep -q \" $2 \" /proc/mounts; then return 0; fi\n"
        "  mount -t ext4 -o \"$3\" \"$dev\" \"$2\"; }\n";
    for (const auto& m : mounts)
        s += "vol " + shellQuote(m.volume.substr(0, 20)) + " " + shellQuote(m.path) + " " +
             (m.readOnly ? "ro,noload,nosuid,nodev" : "rw,nosuid,nodev") + "\n";
    return s;
}

std::string SandboxVolumes::unmountScript(const std::vector<VolumeMount>& mounts) {
    std::string s = "sync\nrc=0\n";
    for (const auto& m : mounts)
        s += "if grep -q \" " + m.path + " \" /proc/mounts; then umount " + shellQuote(m.path) +
             " || rc=1; fi\n";
    return s + "exit $rc\n";
}

}  // namespace airlock

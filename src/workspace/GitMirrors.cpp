#include "workspace/GitMirrors.hpp"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/Clock.hpp"
#include "core/Log.hpp"
#include "core/Sha256.hpp"

namespace airlock::workspace {
namespace fs = std::filesystem;

namespace {
std::string hashOf(const std::string& s) { return sha256Hex(s).substr(0, 32); }
}  // namespace

GitMirrors::GitMirrors(WorkspaceConfig config, FreeSpaceCheck requireFreeSpace)
    : config_(std::move(config)), requireFreeSpace_(std::move(requireFreeSpace)) {
    initGit();
    fs::create_directories(config_.dataDir + "/git");
    fs::permissions(config_.dataDir + "/git", fs::perms::owner_all, fs::perm_options::replace);
    // Scratch checkouts of a previous run are garbage.
    std::error_code ec;
    for (auto& t : fs::directory_iterator(config_.dataDir + "/git", ec))
        fs::remove_all(t.path() / "scratch", ec);
}

std::string GitMirrors::tenantDir(const std::string& tenant) const {
    return config_.dataDir + "/git/" + hashOf("tenant\n" + tenant);
}

std::string GitMirrors::mirrorName(const std::string& urlText) const {
    return hashOf(urlText) + ".git";
}

std::string GitMirrors::mirrorPath(const std::string& tenant, const RemoteUrl& url) const {
    return tenantDir(tenant) + "/mirrors/" + mirrorName(url.text);
}

std::shared_ptr<void> GitMirrors::holdMirror(const std::string& path) {
    auto m = mirrorLocks_.of(path);
    m->lock();
    return std::shared_ptr<void>(m.get(), [m](void*) { m->unlock(); });
}

std::string GitMirrors::fetch(const std::string& tenant, const RemoteUrl& url,
                              const std::optional<BrokeredCredential>& credential) {
    requireAllowedAddress(url, config_.addressPolicy);
    // Disk first: the free-disk floor (507) and the tenant's git quota,
    // then a fetch that stops at whichever of the per-fetch cap, the rest
    // of the quota and the room above the floor comes first.
    if (requireFreeSpace_) requireFreeSpace_("a git fetch", 0);
    std::uint64_t used = config_.tenantQuotaBytes ? tenantUsage(tenant) : 0;
    if (config_.tenantQuotaBytes && used >= config_.tenantQuotaBytes)
        throw Error(ErrorCode::quota_exceeded,
                    "the tenant's git storage holds " + std::to_string(used >> 20) +
                        " MiB, at its quota of " + std::to_string(config_.tenantQuotaBytes >> 20) +
                        " MiB (--git-tenant-quota-mib): no fetch until mirrors are pruned");
    std::string path = mirrorPath(tenant, url);
    auto hold = holdMirror(path);
    GitRemoteAccess remote(url, credential, config_.gitTimeout);
    std::uint64_t limit = config_.maxFetchBytes;
    ErrorCode code = ErrorCode::payload_too_large;
    std::string why = "stopped: the fetch passed the cap of " +
                      std::to_string(config_.maxFetchBytes >> 20) +
                      " MiB per fetch (--git-fetch-max-mib); nothing of it was kept";
    if (config_.tenantQuotaBytes && config_.tenantQuotaBytes - used < limit) {
        limit = config_.tenantQuotaBytes - used;
        code = ErrorCode::quota_exceeded;
        why = "stopped: the fetch would pass the tenant's git quota of " +
              std::to_string(config_.tenantQuotaBytes >> 20) +
              " MiB (--git-tenant-quota-mib); nothing of it was kept";
    }
    struct statvfs st {};
    if (config_.minFreeDiskBytes && ::statvfs(config_.dataDir.c_str(), &st) == 0) {
        std::uint64_t free = static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
        std::uint64_t room = free > config_.minFreeDiskBytes ? free - config_.minFreeDiskBytes : 0;
        if (room < limit) {
            limit = room;
            code = ErrorCode::insufficient_storage;
            why =
                "stopped: the fetch would bring the data directory under its free-disk floor "
                "of " +
                std::to_string(config_.minFreeDiskBytes >> 20) +
                " MiB (--min-free-disk); nothing of it was kept";
        }
    }
    remote.limitBytes(std::max<std::uint64_t>(limit, 1), code, why);
    bool fresh = !fs::exists(path + "/HEAD");
    try {
        git_repository* raw = nullptr;
        if (fresh) {
            fs::create_directories(path);
            check(git_repository_init(&raw, path.c_str(), 1), ErrorCode::internal, "mirror");
        } else {
            check(git_repository_open_bare(&raw, path.c_str()), ErrorCode::internal, "mirror");
        }
        Repository repo(raw);
        // Every use fetches with the caller's credential: what one sandbox
        // fetched is no proof another may read it.
        remote.fetchInto(repo.get());
    } catch (...) {
        // A stopped fetch leaves nothing behind: a new mirror goes whole,
        // an old one loses the pack being written.
        std::error_code ec;
        if (fresh)
            fs::remove_all(path, ec);
        else
            removePartialPacks(path);
        throw;
    }
    // When it was last used, for mirror retention.
    std::ofstream(path + "/airlock-last-used", std::ios::trunc) << nowTimestamp() << "\n";
    return path;
}

void GitMirrors::removePartialPacks(const std::string& mirror) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(mirror + "/objects/pack", ec)) {
        std::string name = e.path().filename().string();
        bool complete = false;
        for (const char* ext : {".pack", ".idx", ".keep", ".rev", ".mtimes", ".promisor"})
            if (name.rfind("pack-", 0) == 0 && name.size() > std::strlen(ext) &&
                name.compare(name.size() - std::strlen(ext), std::string::npos, ext) == 0)
                complete = true;
        if (!complete) fs::remove_all(e.path(), ec);
    }
    // A .pack without its .idx is one the indexer did not finish.
    for (const auto& e : fs::directory_iterator(mirror + "/objects/pack", ec)) {
        auto p = e.path();
        if (p.extension() == ".pack" && !fs::exists(fs::path(p).replace_extension(".idx")))
            fs::remove(p, ec);
    }
}

std::uint64_t GitMirrors::tenantUsage(const std::string& tenant) const {
    std::uint64_t total = 0;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(
             tenantDir(tenant), fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        std::error_code sec;
        if (it->is_regular_file(sec)) total += it->file_size(sec);
    }
    return total;
}

std::size_t GitMirrors::prune(const std::set<std::string>& urlsInUse) {
    if (config_.mirrorRetention.count() <= 0) return 0;
    std::set<std::string> used;
    for (const auto& u : urlsInUse) used.insert(mirrorName(u));
    auto cutoff = fs::file_time_type::clock::now() - config_.mirrorRetention;
    std::size_t pruned = 0;
    std::error_code ec;
    for (const auto& t : fs::directory_iterator(config_.dataDir + "/git", ec)) {
        std::error_code mec;
        std::vector<std::string> gone;
        for (const auto& m : fs::directory_iterator(t.path() / "mirrors", mec)) {
            std::string name = m.path().filename().string();
            if (used.count(name)) continue;
            std::error_code tec;
            auto stamp = m.path() / "airlock-last-used";
            auto when = fs::exists(stamp, tec) ? fs::last_write_time(stamp, tec)
                                               : fs::last_write_time(m.path(), tec);
            if (tec || when > cutoff) continue;
            std::string path = m.path().string();
            auto hold = holdMirror(path);
            fs::remove_all(m.path(), tec);
            if (tec) continue;
            gone.push_back(path + "/objects");
            ++pruned;
            logInfo("workspace", "mirror retention: removed " + path);
        }
        if (gone.empty()) continue;
        // The tenant's work store stops reading them.
        std::string altFile = (t.path() / "work.git/objects/info/alternates").string();
        auto tenantLock = tenantLocks_.of(t.path().string());
        std::lock_guard hold(*tenantLock);
        std::ifstream in(altFile);
        if (!in) continue;
        std::string line, kept;
        while (std::getline(in, line))
            if (std::find(gone.begin(), gone.end(), line) == gone.end()) kept += line + "\n";
        in.close();
        std::string tmp = altFile + ".tmp";
        std::ofstream(tmp, std::ios::trunc) << kept;
        fs::rename(tmp, altFile, ec);
    }
    return pruned;
}

Repository GitMirrors::openWorkRepo(const std::string& tenant,
                                    const std::vector<std::string>& mirrors) {
    std::string path = tenantDir(tenant) + "/work.git";
    auto lock = tenantLocks_.of(tenantDir(tenant));  // mirror retention takes it too
    std::lock_guard hold(*lock);
    if (!fs::exists(path + "/HEAD")) {
        git_repository* raw = nullptr;
        check(git_repository_init(&raw, path.c_str(), 1), ErrorCode::internal, "work repository");
        git_repository_free(raw);
    }
    std::string altFile = path + "/objects/info/alternates";
    std::string existing;
    {
        std::ifstream in(altFile);
        existing.assign(std::istreambuf_iterator<char>(in), {});
    }
    std::string wanted = existing;
    for (const auto& m : mirrors) {
        std::string line = m + "/objects";
        if (wanted.find(line + "\n") == std::string::npos) wanted += line + "\n";
    }
    if (wanted != existing) {
        // Replaced in one rename: a reader never sees it half written.
        fs::create_directories(path + "/objects/info");
        std::string tmp = altFile + ".tmp";
        std::ofstream(tmp, std::ios::trunc) << wanted;
        fs::rename(tmp, altFile);
    }
    return openBareRepository(path);
}

}  // namespace airlock::workspace

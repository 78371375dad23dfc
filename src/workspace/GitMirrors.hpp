#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/KeyedMutexes.hpp"
#include "workspace/GitRemoteAccess.hpp"
#include "workspace/GitSupport.hpp"
#include "workspace/RemoteUrl.hpp"
#include "workspace/WorkspaceConfig.hpp"

namespace airlock::workspace {

// The host's git storage under <data dir>/git, one directory per tenant
// (named by a hash of it): a bare mirror per remote URL, fetched with the
// caller's credential every time it is used, a scratch object store
// (work.git) that reads the mirrors through alternates, and scratch
// checkouts. Fetches are bounded by the per-fetch cap, the tenant's quota
// and the data directory's free-disk floor; a stopped fetch leaves nothing.
class GitMirrors {
  public:
    // Error(insufficient_storage) below the data dir's free-space floor.
    using FreeSpaceCheck = std::function<void(const std::string& what, std::uint64_t needBytes)>;

    // Makes the git directory (owner only) and removes the scratch
    // checkouts a previous run left.
    GitMirrors(WorkspaceConfig config, FreeSpaceCheck requireFreeSpace);

    std::string tenantDir(const std::string& tenant) const;
    std::string mirrorPath(const std::string& tenant, const RemoteUrl& url) const;
    // Fetches the remote into its mirror (made when missing) under the
    // mirror's lock; returns the mirror's path. Error(forbidden) for an
    // address egress would refuse, Error(quota_exceeded),
    // Error(payload_too_large) or Error(insufficient_storage) for a fetch
    // past a bound (and nothing of it is kept).
    std::string fetch(const std::string& tenant, const RemoteUrl& url,
                      const std::optional<BrokeredCredential>& credential);
    // Holds a mirror's lock (a fetch into it waits) while the holder lives.
    std::shared_ptr<void> holdMirror(const std::string& path);
    // The tenant's scratch object store: commits and the guest's blobs,
    // reading `mirrors`' objects through alternates (added, never dropped
    // here: retention drops them).
    Repository openWorkRepo(const std::string& tenant, const std::vector<std::string>& mirrors);
    // Bytes under the tenant's git directory (mirrors, work store, scratch).
    std::uint64_t tenantUsage(const std::string& tenant) const;
    // Removes the mirrors of URLs not in `urlsInUse` that were last used
    // longer than the retention time ago, and the work stores' alternates
    // that named them; returns how many went.
    std::size_t prune(const std::set<std::string>& urlsInUse);
    // The files a stopped fetch left in a mirror's objects/pack.
    static void removePartialPacks(const std::string& mirror);

  private:
    std::string mirrorName(const std::string& urlText) const;

    WorkspaceConfig config_;
    FreeSpaceCheck requireFreeSpace_;
    KeyedMutexes mirrorLocks_, tenantLocks_;
};

}  // namespace airlock::workspace

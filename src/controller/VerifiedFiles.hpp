#pragma once
#include <map>
#include <mutex>
#include <string>

#include "core/SafeFs.hpp"

namespace airlock {

// Snapshot files whose hash matched their manifest, with the identity
// (inode, size, times) they had then: a restore hashes a file again only
// when it changed since.
class VerifiedFiles {
  public:
    void remember(const std::string& path, const safefs::FileIdentity& identity);
    bool unchangedSinceVerified(const std::string& path,
                                const safefs::FileIdentity& identity) const;
    // A discarded snapshot's files (every path under dir).
    void forgetUnder(const std::string& dir);
    std::size_t size() const;

  private:
    mutable std::mutex mutex_;
    std::map<std::string, safefs::FileIdentity> byPath_;
};

}  // namespace airlock

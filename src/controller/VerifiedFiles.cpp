#include "controller/VerifiedFiles.hpp"

namespace airlock {

void VerifiedFiles::remember(const std::string& path, const safefs::FileIdentity& identity) {
    std::lock_guard lock(mutex_);
    byPath_[path] = identity;
}

bool VerifiedFiles::unchangedSinceVerified(const std::string& path,
                                           const safefs::FileIdentity& identity) const {
    std::lock_guard lock(mutex_);
    auto it = byPath_.find(path);
    return it != byPath_.end() && it->second == identity;
}

void VerifiedFiles::forgetUnder(const std::string& dir) {
    std::string prefix = dir.ends_with('/') ? dir : dir + "/";
    std::lock_guard lock(mutex_);
    for (auto it = byPath_.lower_bound(prefix);
         it != byPath_.end() && it->first.compare(0, prefix.size(), prefix) == 0;)
        it = byPath_.erase(it);
}

std::size_t VerifiedFiles::size() const {
    std::lock_guard lock(mutex_);
    return byPath_.size();
}

}  // namespace airlock

#include "packages/PackageCache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "core/Error.hpp"
#include "core/Hex.hpp"
#include "core/Log.hpp"

namespace airlock::packages {

namespace fs = std::filesystem;

namespace {
bool validAlgorithm(const std::string& a) { return a == "sha256" || a == "sha512"; }
bool validHex(const std::string& h) { return isLowerHex(h, 64) || isLowerHex(h, 128); }
}  // namespace

PackageCache::PackageCache(std::string dir, std::uint64_t maxBytes,
                           std::chrono::seconds metadataTtl, std::uint64_t maxMetadataBytes)
    : dir_(std::move(dir)),
      maxBytes_(maxBytes),
      ttl_(metadataTtl),
      maxMetadataBytes_(maxMetadataBytes) {
    std::error_code ec;
    fs::create_directories(dir_ + "/tmp", ec);
    fs::create_directories(dir_ + "/blobs/sha256", ec);
    fs::create_directories(dir_ + "/blobs/sha512", ec);
    if (ec)
        throw Error(ErrorCode::internal,
                    "cannot create the package cache " + dir_ + ": " + ec.message());
    // Staging files a crash left behind.
    for (const auto& e : fs::directory_iterator(dir_ + "/tmp", ec)) fs::remove(e.path(), ec);
    for (const char* a : {"sha256", "sha512"})
        for (const auto& e : fs::directory_iterator(dir_ + "/blobs/" + a, ec))
            if (e.is_regular_file(ec)) blobBytes_ += e.file_size(ec);
}

std::optional<std::string> PackageCache::findBlob(const std::string& algorithm,
                                                  const std::string& hex) {
    if (!validAlgorithm(algorithm) || !validHex(hex)) return std::nullopt;
    std::string path = dir_ + "/blobs/" + algorithm + "/" + hex;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    ::utimensat(AT_FDCWD, path.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);  // recency for eviction
    return path;
}

std::string PackageCache::stagingPath() {
    std::lock_guard lock(mutex_);
    return dir_ + "/tmp/" + std::to_string(::getpid()) + "-" + std::to_string(++nextStaging_);
}

std::string PackageCache::adoptBlob(const std::string& staging, const std::string& algorithm,
                                    const std::string& hex) {
    if (!validAlgorithm(algorithm) || !validHex(hex))
        throw Error(ErrorCode::internal, "bad digest for the package cache");
    std::string path = dir_ + "/blobs/" + algorithm + "/" + hex;
    std::error_code ec;
    auto size = fs::file_size(staging, ec);
    std::lock_guard lock(mutex_);
    bool existed = fs::exists(path, ec);
    if (std::rename(staging.c_str(), path.c_str()) != 0)
        throw Error(ErrorCode::internal, "cannot move a download into the package cache");
    if (!existed) blobBytes_ += size;
    evictLocked();
    return path;
}

void PackageCache::evictLocked() {
    if (blobBytes_ <= maxBytes_) return;
    struct Item {
        fs::path path;
        std::uint64_t size;
        std::int64_t used;
    };
    std::vector<Item> items;
    std::error_code ec;
    for (const char* a : {"sha256", "sha512"})
        for (const auto& e : fs::directory_iterator(dir_ + "/blobs/" + a, ec)) {
            struct stat st {};
            if (::lstat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
            items.push_back({e.path(), static_cast<std::uint64_t>(st.st_size),
                             std::int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec});
        }
    std::sort(items.begin(), items.end(),
              [](const Item& a, const Item& b) { return a.used < b.used; });
    std::uint64_t total = 0;
    for (const auto& i : items) total += i.size;
    // Down to 90% of the cap: not one eviction scan per download.
    std::uint64_t target = maxBytes_ / 10 * 9;
    std::size_t evicted = 0;
    for (const auto& i : items) {
        if (total <= target) break;
        if (fs::remove(i.path, ec)) {
            total -= i.size;
            ++evicted;
        }
    }
    blobBytes_ = total;
    if (evicted) logInfo("packages", "cache: evicted " + std::to_string(evicted) + " artifacts");
}

std::optional<PackageCache::Metadata> PackageCache::findMetadata(const std::string& key) {
    std::lock_guard lock(mutex_);
    auto it = metadata_.find(key);
    if (it == metadata_.end()) return std::nullopt;
    if (std::chrono::steady_clock::now() - it->second.fetched > ttl_) {
        metadataBytes_ -= it->second.data.body.size();
        metadataOrder_.erase(it->second.order);
        metadata_.erase(it);
        return std::nullopt;
    }
    metadataOrder_.splice(metadataOrder_.begin(), metadataOrder_, it->second.order);
    return it->second.data;
}

void PackageCache::putMetadata(const std::string& key, Metadata m) {
    if (m.body.size() > maxMetadataBytes_ / 4) return;  // a giant document is not kept
    std::lock_guard lock(mutex_);
    if (auto it = metadata_.find(key); it != metadata_.end()) {
        metadataBytes_ -= it->second.data.body.size();
        metadataOrder_.erase(it->second.order);
        metadata_.erase(it);
    }
    metadataBytes_ += m.body.size();
    metadataOrder_.push_front(key);
    metadata_[key] = Entry{std::move(m), std::chrono::steady_clock::now(), metadataOrder_.begin()};
    while (metadataBytes_ > maxMetadataBytes_ && !metadataOrder_.empty()) {
        auto last = metadata_.find(metadataOrder_.back());
        metadataBytes_ -= last->second.data.body.size();
        metadata_.erase(last);
        metadataOrder_.pop_back();
    }
}

std::uint64_t PackageCache::blobBytes() {
    std::lock_guard lock(mutex_);
    return blobBytes_;
}

}  // namespace airlock::packages

#pragma once
#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace airlock::packages {

// The package proxy's cache, shared by every sandbox and tenant:
// - artifacts on disk under DIR/blobs/<algorithm>/<hex digest>, named by the
//   registry's own digest and written only once verified against it (so one
//   tenant cannot plant bytes another will get), kept until the size cap
//   evicts the least recently used;
// - metadata (packuments, index pages) in memory for a short time.
class PackageCache {
  public:
    PackageCache(std::string dir, std::uint64_t maxBytes, std::chrono::seconds metadataTtl,
                 std::uint64_t maxMetadataBytes = 256ull << 20);

    // The blob's path if cached (its use is noted for eviction).
    std::optional<std::string> findBlob(const std::string& algorithm, const std::string& hex);
    // A new file to download into (in the cache's own directory, so that
    // adopting it is a rename); removed unless adopted.
    std::string stagingPath();
    // Moves a verified staging file in as the blob; returns its path.
    std::string adoptBlob(const std::string& staging, const std::string& algorithm,
                          const std::string& hex);

    struct Metadata {
        std::string body;
        std::string contentType;
    };
    std::optional<Metadata> findMetadata(const std::string& key);
    void putMetadata(const std::string& key, Metadata m);

    std::uint64_t blobBytes();

  private:
    void evictLocked();
    std::string dir_;
    std::uint64_t maxBytes_;
    std::chrono::seconds ttl_;
    std::uint64_t maxMetadataBytes_;
    std::mutex mutex_;
    std::uint64_t blobBytes_ = 0;
    std::uint64_t nextStaging_ = 0;
    struct Entry {
        Metadata data;
        std::chrono::steady_clock::time_point fetched;
        std::list<std::string>::iterator order;
    };
    std::map<std::string, Entry> metadata_;
    std::list<std::string> metadataOrder_;  // most recent first
    std::uint64_t metadataBytes_ = 0;
};

}  // namespace airlock::packages

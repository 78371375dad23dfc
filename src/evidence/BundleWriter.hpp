#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace airlock {

class EvidenceKey;

// Seals a set of files into an evidence bundle: manifest.json (the caller's
// fields plus "files": every other file's path, size and sha256),
// SHA256SUMS over everything but itself and its signature (GNU format, so
// `sha256sum -c` checks it), SHA256SUMS.sig by the evidence key, all under
// one top directory named by the bundle id, as a reproducible tar.gz.
class BundleWriter {
  public:
    BundleWriter(std::string bundleId, std::int64_t sealedAtUnix)
        : id_(std::move(bundleId)), sealedAt_(sealedAtUnix) {}
    // Relative path; the reserved names (manifest.json, SHA256SUMS*) are refused.
    void add(const std::string& path, std::string content);
    std::size_t size() const { return files_.size(); }

    struct Sealed {
        std::string gz, sha256;
        nlohmann::json manifest;
    };
    Sealed seal(nlohmann::json manifest, const EvidenceKey& key) const;

  private:
    std::string id_;
    std::int64_t sealedAt_;
    std::map<std::string, std::string> files_;
};

}  // namespace airlock

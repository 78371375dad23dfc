#include "evidence/BundleWriter.hpp"

#include "core/Error.hpp"
#include "core/Sha256.hpp"
#include "evidence/EvidenceKey.hpp"
#include "evidence/TarGzWriter.hpp"

namespace airlock {

void BundleWriter::add(const std::string& path, std::string content) {
    if (path == "manifest.json" || path == "SHA256SUMS" || path == "SHA256SUMS.sig")
        throw Error(ErrorCode::internal, path + " is written by the bundle itself");
    if (path.find('\n') != std::string::npos || path.find('\\') != std::string::npos)
        throw Error(ErrorCode::internal,
                    "a bundle path with a newline or backslash: sha256sum would escape it");
    files_[path] = std::move(content);
}

BundleWriter::Sealed BundleWriter::seal(nlohmann::json manifest, const EvidenceKey& key) const {
    TarGzWriter tar(sealedAt_);
    nlohmann::json list = nlohmann::json::array();
    std::map<std::string, std::string> sums;  // path -> sha256, sorted
    for (const auto& [path, content] : files_) {
        std::string sha = sha256Hex(content);
        list.push_back({{"path", path}, {"size", content.size()}, {"sha256", sha}});
        sums[path] = sha;
        tar.add(id_ + "/" + path, content);
    }
    manifest["files"] = list;
    manifest["signing"] = {{"alg", EvidenceKey::kAlg}, {"keyid", key.keyid()}};
    // Guest-chosen names that are not UTF-8 become U+FFFD, never an exception.
    std::string manifestText =
        manifest.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    sums["manifest.json"] = sha256Hex(manifestText);
    tar.add(id_ + "/manifest.json", manifestText);
    std::string sumsText;
    for (const auto& [path, sha] : sums) sumsText += sha + "  " + path + "\n";
    tar.add(id_ + "/SHA256SUMS", sumsText);
    tar.add(id_ + "/SHA256SUMS.sig", key.sign(sumsText));
    Sealed out;
    out.gz = tar.finish();
    out.sha256 = sha256Hex(out.gz);
    out.manifest = std::move(manifest);
    return out;
}

}  // namespace airlock

#include "evidence/BundleVerifier.hpp"

#include <set>

#include "core/Error.hpp"
#include "core/Hex.hpp"
#include "core/Sha256.hpp"
#include "evidence/Dsse.hpp"
#include "evidence/EvidenceKey.hpp"
#include "evidence/PatchReplay.hpp"
#include "evidence/TarGzReader.hpp"

namespace airlock {
namespace {}  // namespace

std::map<std::string, std::string> BundleVerifier::unpack(const std::string& bundleGz) {
    auto files = TarGzReader::read(bundleGz);
    // One top directory (the bundle's id) holding everything: strip it.
    std::string top;
    bool common = !files.empty();
    for (const auto& [path, content] : files) {
        auto slash = path.find('/');
        if (slash == std::string::npos) {
            common = false;
            break;
        }
        std::string first = path.substr(0, slash);
        if (top.empty()) top = first;
        if (first != top) {
            common = false;
            break;
        }
    }
    if (!common) return files;
    std::map<std::string, std::string> stripped;
    for (auto& [path, content] : files)
        stripped.emplace(path.substr(top.size() + 1), std::move(content));
    return stripped;
}

BundleVerifier::Result BundleVerifier::verify(const std::string& bundleGz,
                                              const std::vector<std::string>& keys,
                                              const std::string& repository) {
    Result r;
    std::map<std::string, std::string> files;
    try {
        files = unpack(bundleGz);
        r.passed.push_back("the archive unpacks (" + std::to_string(files.size()) + " files)");
    } catch (const std::exception& e) {
        r.problems.push_back(e.what());
        return r;
    }
    auto sums = files.find("SHA256SUMS");
    auto sig = files.find("SHA256SUMS.sig");
    if (sums == files.end() || sig == files.end()) {
        r.problems.push_back("SHA256SUMS or SHA256SUMS.sig is missing");
        return r;
    }

    // SHA256SUMS: "<hex>  <path>" (or " *<path>"), each file once.
    std::map<std::string, std::string> listed;
    std::size_t start = 0;
    const std::string& text = sums->second;
    bool wellFormed = true;
    while (start < text.size()) {
        auto end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(start, end - start);
        start = end + 1;
        if (line.empty()) continue;
        if (line.size() < 67 || !isLowerHex(line.substr(0, 64), 64) || line[64] != ' ' ||
            (line[65] != ' ' && line[65] != '*')) {
            r.problems.push_back("SHA256SUMS has a malformed line: " + line.substr(0, 120));
            wellFormed = false;
            continue;
        }
        std::string path = line.substr(66);
        if (!listed.emplace(path, line.substr(0, 64)).second)
            r.problems.push_back("SHA256SUMS lists " + path + " twice");
    }
    std::size_t mismatched = r.problems.size();
    for (const auto& [path, hex] : listed) {
        auto f = files.find(path);
        if (f == files.end())
            r.problems.push_back("listed in SHA256SUMS but missing: " + path);
        else if (sha256Hex(f->second) != hex)
            r.problems.push_back("sha256 differs from SHA256SUMS: " + path);
    }
    for (const auto& [path, content] : files)
        if (path != "SHA256SUMS" && path != "SHA256SUMS.sig" && !listed.count(path))
            r.problems.push_back("not listed in SHA256SUMS: " + path);
    if (wellFormed && r.problems.size() == mismatched)
        r.passed.push_back("SHA256SUMS covers every file and every sum holds (" +
                           std::to_string(listed.size()) + ")");

    std::string key;
    for (const auto& pem : keys)
        if (EvidenceKey::verify(pem, sums->second, sig->second)) {
            key = pem;
            break;
        }
    if (key.empty()) {
        r.problems.push_back(keys.empty() ? "no public key to check SHA256SUMS.sig against"
                                          : "SHA256SUMS.sig does not verify with the given key(s)");
    } else {
        r.keyid = EvidenceKey::keyidOf(key);
        r.passed.push_back("SHA256SUMS.sig verifies (key " + r.keyid.substr(0, 16) + ")");
    }

    auto manifest = files.find("manifest.json");
    if (manifest == files.end()) {
        r.problems.push_back("manifest.json is missing");
    } else {
        r.manifest = nlohmann::json::parse(manifest->second, nullptr, false);
        if (!r.manifest.is_object() || !r.manifest.contains("files") ||
            !r.manifest["files"].is_array()) {
            r.problems.push_back("manifest.json is not a bundle manifest");
            r.manifest = nlohmann::json::object();
        } else
            try {
                std::set<std::string> named;
                bool agrees = true;
                for (const auto& f : r.manifest["files"]) {
                    std::string path = f.is_object() ? f.value("path", "") : "";
                    named.insert(path);
                    auto it = files.find(path);
                    if (it == files.end() || f.value("sha256", "") != sha256Hex(it->second) ||
                        f.value("size", std::uint64_t(0)) != it->second.size()) {
                        r.problems.push_back("manifest.json's entry does not match the file: " +
                                             path);
                        agrees = false;
                    }
                }
                for (const auto& [path, content] : files)
                    if (path != "manifest.json" && path != "SHA256SUMS" &&
                        path != "SHA256SUMS.sig" && !named.count(path)) {
                        r.problems.push_back("manifest.json does not list " + path);
                        agrees = false;
                    }
                if (agrees)
                    r.passed.push_back("manifest.json lists every file with its size and sum");
            } catch (const nlohmann::json::exception&) {
                r.problems.push_back("manifest.json has fields of the wrong type");
                r.manifest = nlohmann::json::object();
            }
    }

    // The manifest names the key that sealed it: a bundle re-signed by
    // another accepted key (an older one, say) says so.
    if (!key.empty() && r.manifest.is_object()) {
        const auto& signing = r.manifest.contains("signing") && r.manifest["signing"].is_object()
                                  ? r.manifest["signing"]
                                  : nlohmann::json::object();
        std::string named = signing.contains("keyid") && signing["keyid"].is_string()
                                ? signing["keyid"].get<std::string>()
                                : std::string();
        if (named == r.keyid)
            r.passed.push_back("manifest.json names the key that verified it");
        else
            r.problems.push_back("manifest.json names key " +
                                 (named.empty() ? std::string("(none)") : named.substr(0, 16)) +
                                 ", but SHA256SUMS.sig verifies with " + r.keyid.substr(0, 16));
    }

    auto attestations = files.find("attestations.intoto.jsonl");
    if (attestations != files.end() && !key.empty()) {
        std::size_t n = 0, bad = 0;
        std::size_t pos = 0;
        const std::string& lines = attestations->second;
        while (pos < lines.size()) {
            auto end = lines.find('\n', pos);
            if (end == std::string::npos) end = lines.size();
            std::string line = lines.substr(pos, end - pos);
            pos = end + 1;
            if (line.empty()) continue;
            ++n;
            try {
                dsse::verify(nlohmann::json::parse(line), key);
            } catch (const std::exception&) {
                ++bad;
            }
        }
        if (bad)
            r.problems.push_back(std::to_string(bad) + " of " + std::to_string(n) +
                                 " attestations do not verify with the key");
        else
            r.passed.push_back("every attestation's DSSE signature verifies (" + std::to_string(n) +
                               ")");
    }

    if (!repository.empty()) {
        const auto& ws = r.manifest.is_object() && r.manifest.contains("workspace")
                             ? r.manifest["workspace"]
                             : nlohmann::json();
        auto patch = files.find("changes/changes.patch");
        if (!ws.is_object() || !ws.contains("base_commit") || !ws.contains("final_tree") ||
            patch == files.end()) {
            r.problems.push_back(
                "the bundle has no workspace base commit, final tree or patch to replay");
        } else {
            try {
                std::string tree =
                    treeAfterPatch(repository, ws.value("base_commit", ""), patch->second);
                if (tree == ws.value("final_tree", ""))
                    r.passed.push_back("the patch applied to " +
                                       ws.value("base_commit", "").substr(0, 12) +
                                       " gives the recorded tree " + tree.substr(0, 12));
                else
                    r.problems.push_back("the patch applied to the base gives tree " + tree +
                                         ", the manifest records " + ws.value("final_tree", ""));
            } catch (const std::exception& e) {
                r.problems.push_back(e.what());
            }
        }
    }
    return r;
}

}  // namespace airlock

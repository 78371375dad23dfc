#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace airlock {

// Checks an evidence bundle offline, trusting nothing in it:
//   - it unpacks within limits (files and directories only, no "..");
//   - SHA256SUMS lists every other file exactly once and each sum holds;
//   - SHA256SUMS.sig is a signature of SHA256SUMS by one of the given keys;
//   - every DSSE envelope in attestations.intoto.jsonl verifies by that key;
//   - manifest.json lists the same files, sizes and sums;
//   - with a repository: changes/changes.patch applied to the manifest's
//     base commit gives the manifest's final tree.
// ok() only when every check held; problems() says what did not.
class BundleVerifier {
  public:
    struct Result {
        std::vector<std::string> passed, problems;
        std::string keyid;  // of the key whose signature verified
        nlohmann::json manifest;
        bool ok() const { return problems.empty() && !passed.empty(); }
    };
    // publicKeyPems: the keys to accept (one given by the user, or the
    // daemon's list); repository: a local clone, or "" to skip that check.
    static Result verify(const std::string& bundleGz, const std::vector<std::string>& publicKeyPems,
                         const std::string& repository = {});
    // The unpacked files of a bundle with its top directory removed.
    static std::map<std::string, std::string> unpack(const std::string& bundleGz);
};

}  // namespace airlock

#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "packages/PackageRules.hpp"

namespace airlock::packages {

// One version of an npm package as its packument describes it.
struct NpmVersion {
    std::string name;
    std::string version;
    std::optional<std::int64_t> published;  // from "time"
    bool installScripts = false;            // hasInstallScript or a (pre|post)install script
    std::string integrity;                  // "sha512-<base64>" (SRI), if given
    std::string shasum;                     // sha1 hex, if given
    std::string tarball;                    // upstream URL
};

// A version of the packument (nullopt when it has none such, or it is not an object).
std::optional<NpmVersion> npmVersion(const nlohmann::json& packument, const std::string& version);

struct FilteredVersion {
    std::string version;
    Verdict verdict;
};

struct FilteredPackument {
    nlohmann::json doc;                    // what the guest gets
    std::vector<FilteredVersion> kept;     // served (allowed, or held for approval at download)
    std::vector<FilteredVersion> refused;  // removed (or, in a dry run, would have been)
};

// Applies the rules to every version: refused versions leave "versions" and
// "time"; dist-tags pointing at one are dropped, "latest" moved to the
// highest version left (a release before a pre-release). Versions whose
// gate is "approve" stay: their download asks for the approval. In a dry
// run nothing is removed. Each tarball URL becomes
// `tarballBase/<name>/-/<file>.tgz` (the proxy's own address).
FilteredPackument filterPackument(const nlohmann::json& packument, const std::string& name,
                                  const PackageRules& rules, std::int64_t nowUnix,
                                  const std::string& tarballBase);

// "/name/-/name-1.0.0.tgz" or "/@scope/name/-/name-1.0.0.tgz" (the scope's
// slash may be %2f): the package name and version, or nullopt.
struct NpmTarballPath {
    std::string name;
    std::string version;
    std::string file;
};
std::optional<NpmTarballPath> parseNpmTarballPath(const std::string& path);
// "/name", "/@scope%2fname" or "/@scope/name": the package name, or nullopt
// (anything else: search, audit, login, ping...).
std::optional<std::string> parseNpmPackagePath(const std::string& path);
// Whether a string is an npm package name (lower-case, url-safe, an optional scope).
bool validNpmName(const std::string& name);

// The hex digest of an SRI string "sha512-<base64>"; empty if not sha512 SRI.
std::string sriSha512Hex(const std::string& integrity);

}  // namespace airlock::packages

#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "packages/HttpUrl.hpp"
#include "packages/PackageRules.hpp"

namespace airlock::packages {

// One file of a project in a simple index (PEP 503 HTML or PEP 691 JSON).
struct PypiFile {
    std::string filename;
    std::string url;                       // absolute, upstream
    std::string sha256;                    // hex, lower-case; empty if the index gave none
    std::optional<std::int64_t> uploaded;  // PEP 700 upload-time (JSON only)
    std::string requiresPython;
    nlohmann::json yanked = false;  // false, true or a reason string
    std::optional<std::uint64_t> size;
    bool sdist = false;
    std::string version;  // from the file name
};

// The files of a project page. JSON when the content type says so, else
// HTML anchors. `page` resolves relative links. Throws Error(bad_request)
// when the body is neither.
std::vector<PypiFile> parsePypiIndex(const std::string& body, const std::string& contentType,
                                     const HttpUrl& page);

// The version in a distribution's file name ("pkg-1.0-py3-none-any.whl",
// "pkg-1.0.tar.gz"); empty when the name is not a distribution's.
std::string pypiFileVersion(const std::string& filename, bool& sdist);

struct PypiFilterResult {
    std::vector<PypiFile> kept;
    std::vector<std::pair<PypiFile, Verdict>> refused;
};
PypiFilterResult filterPypiFiles(const std::vector<PypiFile>& files, const std::string& project,
                                 const PackageRules& rules, std::int64_t nowUnix);

// The page served to the guest: each file's URL is `fileBase/<sha256>/<filename>`.
std::string renderPypiJson(const std::string& project, const std::vector<PypiFile>& files,
                           const std::string& fileBase);
std::string renderPypiHtml(const std::string& project, const std::vector<PypiFile>& files,
                           const std::string& fileBase);

}  // namespace airlock::packages

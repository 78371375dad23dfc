#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace airlock {

// Dependencies added, removed, upgraded or downgraded between two versions
// of a lockfile or manifest, read from the files themselves:
//   package-lock.json / npm-shrinkwrap.json (lockfileVersion 1, 2 and 3),
//   package.json (dependencies, devDependencies, optionalDependencies,
//   peerDependencies), requirements*.txt (name==version, other specifiers
//   kept as text; comments, options and line continuations understood).
// "" for a side means the file did not exist there. A file that does not
// parse gives one change with an empty name and the reason in `after`.
struct DependencyChange {
    std::string ecosystem;  // npm | pypi
    std::string file;
    std::string name;
    std::string before, after;  // version (lockfiles) or specifier (manifests)
    std::string change;         // added | removed | upgraded | downgraded | changed | unreadable
};

namespace dependencies {

bool isLockfile(std::string_view path);  // any ecosystem's lockfile, by name
bool isManifest(std::string_view path);  // package.json, requirements*.txt, pyproject.toml, ...
// Whether diff() reads this file (the others are only flagged by name).
bool understands(std::string_view path);
std::vector<DependencyChange> diff(const std::string& path, std::string_view before,
                                   std::string_view after);

}  // namespace dependencies
}  // namespace airlock

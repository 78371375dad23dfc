#include "evidence/DependencyChanges.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "packages/VersionRange.hpp"

namespace airlock::dependencies {
namespace {

using Versions = std::map<std::string, std::string>;  // name -> version or specifier

std::string_view baseName(std::string_view path) {
    auto slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

struct Unreadable {
    std::string why;
};

nlohmann::json parseJson(std::string_view text, const char* what) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        throw Unreadable{std::string(what) + " is not a JSON object"};
    return j;
}

// "node_modules/a/node_modules/@s/b" -> "@s/b"
std::string packageNameOf(const std::string& key) {
    auto at = key.rfind("node_modules/");
    return at == std::string::npos ? key : key.substr(at + 13);
}

void lockV1(const nlohmann::json& deps, const std::string& prefix, Versions& out, int depth) {
    if (depth > 64 || !deps.is_object()) return;
    for (const auto& [name, info] : deps.items()) {
        if (!info.is_object()) continue;
        std::string key = prefix.empty() ? name : prefix + " > " + name;
        if (info.contains("version") && info["version"].is_string())
            out[prefix.empty() ? name : key] = info["version"].get<std::string>();
        if (info.contains("dependencies")) lockV1(info["dependencies"], key, out, depth + 1);
    }
}

Versions npmLock(std::string_view text) {
    Versions out;
    if (text.empty()) return out;
    auto j = parseJson(text, "the lockfile");
    if (j.contains("packages") && j["packages"].is_object()) {
        // v2/v3: one entry per installed path; a package installed at
        // several paths is listed once per distinct version.
        std::map<std::string, std::vector<std::string>> byName;
        for (const auto& [key, info] : j["packages"].items()) {
            if (key.empty() || !info.is_object() || !info.contains("version") ||
                !info["version"].is_string())
                continue;
            if (key.find("node_modules/") == std::string::npos) continue;  // workspace links
            auto& list = byName[packageNameOf(key)];
            std::string v = info["version"].get<std::string>();
            if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
        }
        for (auto& [name, list] : byName) {
            std::sort(list.begin(), list.end(), [](const std::string& a, const std::string& b) {
                return packages::compareVersions(a, b) < 0;
            });
            std::string joined;
            for (const auto& v : list) joined += (joined.empty() ? "" : ", ") + v;
            out[name] = joined;
        }
        return out;
    }
    if (j.contains("dependencies")) lockV1(j["dependencies"], "", out, 0);
    return out;
}

Versions npmManifest(std::string_view text) {
    Versions out;
    if (text.empty()) return out;
    auto j = parseJson(text, "package.json");
    for (const char* section :
         {"dependencies", "devDependencies", "optionalDependencies", "peerDependencies"}) {
        if (!j.contains(section) || !j[section].is_object()) continue;
        for (const auto& [name, spec] : j[section].items())
            if (spec.is_string())
                out[name] = spec.get<std::string>() + (std::string(section) == "dependencies"
                                                           ? ""
                                                           : " (" + std::string(section) + ")");
    }
    return out;
}

// PEP 503: lower case, runs of -, _ and . as one -.
std::string normalisePypiName(std::string_view name) {
    std::string out;
    for (char c : name) {
        if (c == '-' || c == '_' || c == '.') {
            if (out.empty() || out.back() != '-') out.push_back('-');
        } else {
            out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
        }
    }
    return out;
}

Versions requirements(std::string_view text) {
    Versions out;
    std::string joined;
    // Continuations first ("\" at a line's end), then one requirement per line.
    std::string s(text);
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == '\n') {
            ++i;
            continue;
        }
        joined.push_back(s[i]);
    }
    std::size_t start = 0;
    while (start < joined.size()) {
        auto end = joined.find('\n', start);
        if (end == std::string::npos) end = joined.size();
        std::string line = joined.substr(start, end - start);
        start = end + 1;
        if (auto hash = line.find(" #"); hash != std::string::npos) line.resize(hash);
        if (!line.empty() && line[0] == '#') continue;
        auto first = line.find_first_not_of(" \t\r");
        if (first == std::string::npos) continue;
        line = line.substr(first);
        if (line[0] == '-') continue;  // -r, -c, --index-url, ...
        // Options after the requirement (--hash=...) and markers (; ...).
        if (auto opt = line.find(" --"); opt != std::string::npos) line.resize(opt);
        std::string marker;
        if (auto semi = line.find(';'); semi != std::string::npos) {
            marker = line.substr(semi);
            line.resize(semi);
        }
        while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r'))
            line.pop_back();
        std::size_t n = 0;
        while (n < line.size() && (std::isalnum(static_cast<unsigned char>(line[n])) ||
                                   line[n] == '-' || line[n] == '_' || line[n] == '.'))
            ++n;
        if (n == 0) continue;  // a URL or path requirement: not named here
        std::string name = normalisePypiName(line.substr(0, n));
        std::string rest = line.substr(n);
        if (auto extras = rest.find(']');
            !rest.empty() && rest[0] == '[' && extras != std::string::npos)
            rest = rest.substr(extras + 1);
        rest.erase(
            std::remove_if(rest.begin(), rest.end(), [](char c) { return c == ' ' || c == '\t'; }),
            rest.end());
        if (rest.rfind("==", 0) == 0 && rest.find_first_of(",<>!~*", 2) == std::string::npos)
            rest = rest.substr(2);
        out[name] = rest.empty() ? "*" : rest;
    }
    return out;
}

bool pinned(const std::string& v) {
    return !v.empty() && std::isdigit(static_cast<unsigned char>(v[0])) &&
           v.find_first_of(" ,<>=~^*|") == std::string::npos;
}

std::vector<DependencyChange> compare(const std::string& ecosystem, const std::string& file,
                                      const Versions& a, const Versions& b) {
    std::vector<DependencyChange> out;
    for (const auto& [name, v] : a)
        if (!b.count(name)) out.push_back({ecosystem, file, name, v, "", "removed"});
    for (const auto& [name, v] : b) {
        auto it = a.find(name);
        if (it == a.end()) {
            out.push_back({ecosystem, file, name, "", v, "added"});
        } else if (it->second != v) {
            std::string change = "changed";
            if (pinned(it->second) && pinned(v))
                change = packages::compareVersions(it->second, v) < 0 ? "upgraded" : "downgraded";
            out.push_back({ecosystem, file, name, it->second, v, change});
        }
    }
    std::sort(out.begin(), out.end(),
              [](const DependencyChange& x, const DependencyChange& y) { return x.name < y.name; });
    return out;
}

}  // namespace

bool isLockfile(std::string_view path) {
    auto n = baseName(path);
    for (const char* lock :
         {"package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb",
          "poetry.lock", "Pipfile.lock", "uv.lock", "pdm.lock", "Cargo.lock", "go.sum",
          "Gemfile.lock", "composer.lock"})
        if (n == lock) return true;
    return false;
}

bool isManifest(std::string_view path) {
    auto n = baseName(path);
    for (const char* m : {"package.json", "pyproject.toml", "setup.py", "setup.cfg", "Pipfile",
                          "Cargo.toml", "go.mod", "Gemfile", "composer.json"})
        if (n == m) return true;
    return n.rfind("requirements", 0) == 0 && n.size() > 4 && n.substr(n.size() - 4) == ".txt";
}

bool understands(std::string_view path) {
    auto n = baseName(path);
    return n == "package-lock.json" || n == "npm-shrinkwrap.json" || n == "package.json" ||
           (n.rfind("requirements", 0) == 0 && n.size() > 4 && n.substr(n.size() - 4) == ".txt");
}

std::vector<DependencyChange> diff(const std::string& path, std::string_view before,
                                   std::string_view after) {
    auto n = baseName(path);
    try {
        if (n == "package-lock.json" || n == "npm-shrinkwrap.json")
            return compare("npm", path, npmLock(before), npmLock(after));
        if (n == "package.json")
            return compare("npm", path, npmManifest(before), npmManifest(after));
        if (understands(path))
            return compare("pypi", path, requirements(before), requirements(after));
    } catch (const Unreadable& u) {
        return {{n == "package.json" || n.find("lock") != std::string_view::npos ? "npm" : "pypi",
                 path, "", "", u.why, "unreadable"}};
    }
    return {};
}

}  // namespace airlock::dependencies

#include "packages/NpmPackument.hpp"

#include <openssl/evp.h>

#include <algorithm>

#include "core/Clock.hpp"
#include "core/Hex.hpp"
#include "packages/VersionRange.hpp"

namespace airlock::packages {

using nlohmann::json;

namespace {
std::string unscoped(const std::string& name) {
    auto slash = name.find('/');
    return slash == std::string::npos ? name : name.substr(slash + 1);
}

std::string percentDecodeSlash(std::string s) {
    for (std::size_t at;
         (at = s.find("%2f")) != std::string::npos || (at = s.find("%2F")) != std::string::npos;)
        s.replace(at, 3, "/");
    return s;
}
}  // namespace

bool validNpmName(const std::string& name) {
    if (name.empty() || name.size() > 214) return false;
    std::string rest = name;
    if (name[0] == '@') {
        auto slash = name.find('/');
        if (slash == std::string::npos || slash < 2 || slash + 1 >= name.size()) return false;
        if (name.find('/', slash + 1) != std::string::npos) return false;
        rest = name.substr(1, slash - 1) + name.substr(slash + 1);
    }
    if (rest[0] == '.' || rest[0] == '_') return false;
    for (char c : rest)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
              c == '_' || c == '~' || (c >= 'A' && c <= 'Z')))
            return false;
    return true;
}

std::optional<std::string> parseNpmPackagePath(const std::string& path) {
    if (path.size() < 2 || path[0] != '/') return std::nullopt;
    std::string name = percentDecodeSlash(path.substr(1));
    if (!name.empty() && name.back() == '/') name.pop_back();
    if (!validNpmName(name)) return std::nullopt;
    return name;
}

std::optional<NpmTarballPath> parseNpmTarballPath(const std::string& path) {
    std::string p = percentDecodeSlash(path);
    auto dash = p.find("/-/");
    if (p.empty() || p[0] != '/' || dash == std::string::npos) return std::nullopt;
    NpmTarballPath out;
    out.name = p.substr(1, dash - 1);
    out.file = p.substr(dash + 3);
    if (!validNpmName(out.name) || out.file.find('/') != std::string::npos) return std::nullopt;
    std::string prefix = unscoped(out.name) + "-";
    if (out.file.size() <= prefix.size() + 4 || out.file.compare(0, prefix.size(), prefix) != 0 ||
        out.file.compare(out.file.size() - 4, 4, ".tgz") != 0)
        return std::nullopt;
    out.version = out.file.substr(prefix.size(), out.file.size() - prefix.size() - 4);
    if (out.version.empty() || out.version.size() > 256) return std::nullopt;
    return out;
}

std::optional<NpmVersion> npmVersion(const json& packument, const std::string& version) {
    if (!packument.is_object()) return std::nullopt;
    auto versions = packument.find("versions");
    if (versions == packument.end() || !versions->is_object()) return std::nullopt;
    auto v = versions->find(version);
    if (v == versions->end() || !v->is_object()) return std::nullopt;
    NpmVersion out;
    out.name = packument.value("name", std::string());
    if (auto n = v->find("name"); n != v->end() && n->is_string()) out.name = n->get<std::string>();
    out.version = version;
    if (auto t = packument.find("time"); t != packument.end() && t->is_object())
        if (auto when = t->find(version); when != t->end() && when->is_string())
            out.published = parseTimestamp(when->get<std::string>());
    if (auto h = v->find("hasInstallScript"); h != v->end() && h->is_boolean() && h->get<bool>())
        out.installScripts = true;
    if (auto s = v->find("scripts"); s != v->end() && s->is_object())
        for (const char* k : {"preinstall", "install", "postinstall"})
            if (s->contains(k)) out.installScripts = true;
    if (auto d = v->find("dist"); d != v->end() && d->is_object()) {
        if (auto i = d->find("integrity"); i != d->end() && i->is_string())
            out.integrity = i->get<std::string>();
        if (auto s = d->find("shasum"); s != d->end() && s->is_string())
            out.shasum = s->get<std::string>();
        if (auto t = d->find("tarball"); t != d->end() && t->is_string())
            out.tarball = t->get<std::string>();
    }
    return out;
}

FilteredPackument filterPackument(const json& packument, const std::string& name,
                                  const PackageRules& rules, std::int64_t nowUnix,
                                  const std::string& tarballBase) {
    FilteredPackument out;
    out.doc = packument;
    json& doc = out.doc;
    if (!doc.is_object()) doc = json::object();
    if (!doc.contains("versions") || !doc["versions"].is_object()) doc["versions"] = json::object();
    std::vector<std::string> names;
    for (auto it = doc["versions"].begin(); it != doc["versions"].end(); ++it)
        names.push_back(it.key());
    for (const auto& version : names) {
        auto info = npmVersion(doc, version);
        if (!info) {
            doc["versions"].erase(version);
            continue;
        }
        auto verdict = judge(Ecosystem::npm, rules.npm, name, version, info->published,
                             info->installScripts, nowUnix);
        bool keep = verdict.gate != Gate::deny || rules.dryRun;
        if (verdict.gate == Gate::deny)
            out.refused.push_back({version, verdict});
        else
            out.kept.push_back({version, verdict});
        if (!keep) {
            doc["versions"].erase(version);
            if (doc.contains("time") && doc["time"].is_object()) doc["time"].erase(version);
            continue;
        }
        auto& dist = doc["versions"][version]["dist"];
        if (!dist.is_object()) dist = json::object();
        dist["tarball"] =
            tarballBase + "/" + name + "/-/" + unscoped(name) + "-" + version + ".tgz";
    }
    // Tags: kept only while their version is; "latest" repaired.
    json tags = doc.contains("dist-tags") && doc["dist-tags"].is_object() ? doc["dist-tags"]
                                                                          : json::object();
    json repaired = json::object();
    for (auto it = tags.begin(); it != tags.end(); ++it)
        if (it->is_string() && doc["versions"].contains(it->get<std::string>()))
            repaired[it.key()] = *it;
    if (!repaired.contains("latest") && !doc["versions"].empty()) {
        // The highest release kept at or below the maintainer's own latest
        // (not a newer major tagged "next"); failing that, the highest kept.
        std::string original = tags.contains("latest") && tags["latest"].is_string()
                                   ? tags["latest"].get<std::string>()
                                   : std::string();
        auto pick = [&](bool capped) {
            std::string best;
            bool bestRelease = false;
            for (auto it = doc["versions"].begin(); it != doc["versions"].end(); ++it) {
                if (capped && (original.empty() || compareVersions(it.key(), original) > 0))
                    continue;
                bool release = !isPrerelease(it.key());
                if (capped && !release) continue;
                if (best.empty() || (release && !bestRelease) ||
                    (release == bestRelease && compareVersions(it.key(), best) > 0)) {
                    best = it.key();
                    bestRelease = release;
                }
            }
            return best;
        };
        std::string best = pick(true);
        repaired["latest"] = best.empty() ? pick(false) : best;
    }
    doc["dist-tags"] = repaired;
    return out;
}

std::string sriSha512Hex(const std::string& integrity) {
    // SRI may list several digests separated by spaces: take the sha512 one.
    std::size_t start = 0;
    while (start < integrity.size()) {
        auto end = integrity.find(' ', start);
        std::string item =
            integrity.substr(start, end == std::string::npos ? std::string::npos : end - start);
        start = end == std::string::npos ? integrity.size() : end + 1;
        if (item.rfind("sha512-", 0) != 0) continue;
        std::string b64 = item.substr(
            7, item.find('?') == std::string::npos ? std::string::npos : item.find('?') - 7);
        if (b64.size() != 88) continue;
        unsigned char raw[96];
        int n = EVP_DecodeBlock(raw, reinterpret_cast<const unsigned char*>(b64.data()),
                                static_cast<int>(b64.size()));
        if (n != 66) continue;  // 64 bytes plus the two padding bytes EVP counts
        return hexEncode(raw, 64);
    }
    return "";
}

}  // namespace airlock::packages

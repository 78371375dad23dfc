#include "packages/PackageRules.hpp"

#include <algorithm>
#include <cctype>

#include "core/Error.hpp"
#include "core/JsonFields.hpp"
#include "core/Wildcard.hpp"

namespace airlock::packages {

using nlohmann::json;

const char* ecosystemName(Ecosystem e) {
    switch (e) {
        case Ecosystem::npm:
            return "npm";
        case Ecosystem::pypi:
            return "pypi";
        case Ecosystem::apt:
            return "apt";
    }
    return "?";
}

std::optional<Ecosystem> parseEcosystem(const std::string& name) {
    if (name == "npm") return Ecosystem::npm;
    if (name == "pypi") return Ecosystem::pypi;
    if (name == "apt") return Ecosystem::apt;
    return std::nullopt;
}

const char* gateName(Gate g) {
    switch (g) {
        case Gate::deny:
            return "deny";
        case Gate::approve:
            return "approve";
        case Gate::allow:
            return "allow";
    }
    return "?";
}

std::string normalizeName(Ecosystem e, const std::string& name) {
    std::string out;
    out.reserve(name.size());
    if (e == Ecosystem::pypi) {
        bool sep = false;
        for (char c : name) {
            if (c == '-' || c == '_' || c == '.') {
                sep = true;
                continue;
            }
            if (sep && !out.empty()) out += '-';
            sep = false;
            out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        }
        return out;
    }
    if (e == Ecosystem::apt) return name;
    for (char c : name) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

namespace {
// '*' matches any run of characters (also '/': "@scope/*" is every package
// of the scope); everything else literally. Iterative: no blow-up.
bool wildcard(const std::string& pattern, const std::string& text) {
    return wildcardMatch(pattern, text, false);
}

Gate parseGate(const json& v, const std::string& what) {
    if (v.is_string()) {
        auto s = v.get<std::string>();
        if (s == "deny") return Gate::deny;
        if (s == "approve") return Gate::approve;
        if (s == "allow") return Gate::allow;
    }
    throw Error(ErrorCode::bad_request,
                "'" + what + "' must be \"deny\", \"approve\" or \"allow\"");
}

NameRule parseNameRule(Ecosystem e, const std::string& text, const std::string& what) {
    if (text.empty() || text.size() > 256)
        throw Error(ErrorCode::bad_request, "'" + what + "' entries must be 1 to 256 characters");
    for (char c : text)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
            throw Error(ErrorCode::bad_request, "'" + what + "' entries must be printable");
    // A scoped npm name starts with '@': the version's '@' is the next one.
    std::size_t at = text.find('@', text[0] == '@' ? 1 : 0);
    NameRule rule;
    rule.text = text;
    rule.namePattern = normalizeName(e, text.substr(0, at));
    if (e == Ecosystem::pypi) {
        // PEP 503 would eat the '*' with the separators around it.
        rule.namePattern.clear();
        std::string name = text.substr(0, at);
        std::string piece;
        for (std::size_t i = 0; i <= name.size(); ++i) {
            if (i == name.size() || name[i] == '*') {
                rule.namePattern += normalizeName(e, piece);
                if (i < name.size()) rule.namePattern += '*';
                piece.clear();
            } else {
                piece += name[i];
            }
        }
    }
    if (rule.namePattern.empty())
        throw Error(ErrorCode::bad_request, "'" + what + "' entry '" + text + "' names no package");
    if (at != std::string::npos) rule.range = VersionRange::parse(text.substr(at + 1));
    return rule;
}

EcosystemRulesChange parseEcosystemChange(Ecosystem e, const json& j) {
    EcosystemRulesChange r;
    std::string prefix = std::string("packages.") + ecosystemName(e);
    requireObject(j, prefix);
    switch (e) {
        case Ecosystem::npm:
            rejectUnknownFields(j, {"enabled", "deny", "min_age_days", "install_scripts"}, prefix);
            break;
        case Ecosystem::pypi:
            rejectUnknownFields(j, {"enabled", "deny", "min_age_days", "only_binary"}, prefix);
            break;
        case Ecosystem::apt:
            rejectUnknownFields(j, {"enabled", "mode", "deny"}, prefix);
            break;
    }
    if (auto v = j.find("enabled"); v != j.end()) {
        if (!v->is_boolean())
            throw Error(ErrorCode::bad_request, "'" + prefix + ".enabled' must be a boolean");
        r.enabled = v->get<bool>();
    }
    if (auto v = j.find("deny"); v != j.end()) {
        if (!v->is_array() || v->size() > 256)
            throw Error(ErrorCode::bad_request,
                        "'" + prefix + ".deny' must be a list of at most 256 names");
        for (const auto& d : *v) {
            if (!d.is_string())
                throw Error(ErrorCode::bad_request,
                            "'" + prefix + ".deny' entries must be strings");
            r.deny.push_back(parseNameRule(e, d.get<std::string>(), prefix + ".deny"));
        }
    }
    if (auto v = j.find("min_age_days"); v != j.end()) {
        if (!v->is_number_unsigned() || v->get<std::uint64_t>() > 3650)
            throw Error(ErrorCode::bad_request,
                        "'" + prefix + ".min_age_days' must be a whole number of days (0 to 3650)");
        r.minAgeDays = v->get<unsigned>();
    }
    if (auto v = j.find("install_scripts"); v != j.end())
        r.installScripts = parseGate(*v, prefix + ".install_scripts");
    if (auto v = j.find("only_binary"); v != j.end()) {
        if (!v->is_boolean())
            throw Error(ErrorCode::bad_request, "'" + prefix + ".only_binary' must be a boolean");
        r.onlyBinary = v->get<bool>();
    }
    if (auto v = j.find("mode"); v != j.end()) r.aptMode = parseGate(*v, prefix + ".mode");
    return r;
}

json ecosystemJson(Ecosystem e, const EcosystemRules& r) {
    json deny = json::array();
    for (const auto& d : r.deny) deny.push_back(d.text);
    json j{{"enabled", r.enabled}, {"deny", deny}};
    if (e == Ecosystem::apt) {
        j["mode"] = gateName(r.aptMode);
        return j;
    }
    j["min_age_days"] = r.minAgeDays;
    if (e == Ecosystem::npm) j["install_scripts"] = gateName(r.installScripts);
    if (e == Ecosystem::pypi) j["only_binary"] = r.onlyBinary;
    return j;
}
}  // namespace

bool NameRule::matches(const std::string& name, const std::string& version) const {
    if (!wildcard(namePattern, name)) return false;
    if (range.any()) return true;
    return !version.empty() && range.contains(version);
}

PackageRules PackageRules::parse(const json& j) { return parse(j, PackageRules()); }

PackageRules PackageRules::parse(const json& j, const PackageRules& base) {
    return PackageRulesChange::parse(j).over(base);
}

void EcosystemRulesChange::applyTo(EcosystemRules& r) const {
    if (enabled) r.enabled = *enabled;
    for (const auto& rule : deny) {
        bool known = false;
        for (const auto& have : r.deny) known = known || have.text == rule.text;
        if (!known) r.deny.push_back(rule);
    }
    if (minAgeDays) r.minAgeDays = *minAgeDays;
    if (installScripts) r.installScripts = *installScripts;
    if (onlyBinary) r.onlyBinary = *onlyBinary;
    if (aptMode) r.aptMode = *aptMode;
}

PackageRulesChange PackageRulesChange::parse(const json& j) {
    requireObject(j, "packages");
    rejectUnknownFields(j, {"npm", "pypi", "apt", "dry_run"}, "packages");
    PackageRulesChange c;
    if (j.contains("npm")) c.npm = parseEcosystemChange(Ecosystem::npm, j["npm"]);
    if (j.contains("pypi")) c.pypi = parseEcosystemChange(Ecosystem::pypi, j["pypi"]);
    if (j.contains("apt")) c.apt = parseEcosystemChange(Ecosystem::apt, j["apt"]);
    if (auto v = j.find("dry_run"); v != j.end()) {
        if (!v->is_boolean())
            throw Error(ErrorCode::bad_request, "'packages.dry_run' must be a boolean");
        c.dryRun = v->get<bool>();
    }
    return c;
}

PackageRules PackageRulesChange::over(const PackageRules& base) const {
    PackageRules r = base;
    if (npm) npm->applyTo(r.npm);
    if (pypi) pypi->applyTo(r.pypi);
    if (apt) apt->applyTo(r.apt);
    if (dryRun) r.dryRun = *dryRun;
    return r;
}

PackageRules PackageRules::fromStored(const std::string& text) {
    auto j = json::parse(text, nullptr, false);
    if (!j.is_object()) return PackageRules();
    try {
        return parse(j);
    } catch (const std::exception&) {
        return PackageRules();
    }
}

json PackageRules::toJson() const {
    return {{"npm", ecosystemJson(Ecosystem::npm, npm)},
            {"pypi", ecosystemJson(Ecosystem::pypi, pypi)},
            {"apt", ecosystemJson(Ecosystem::apt, apt)},
            {"dry_run", dryRun}};
}

std::string PackageRules::looserThan(const PackageRules& base) const {
    // deny > approve > allow, from strictest.
    auto rank = [](Gate g) { return g == Gate::deny ? 0 : g == Gate::approve ? 1 : 2; };
    for (Ecosystem e : {Ecosystem::npm, Ecosystem::pypi, Ecosystem::apt}) {
        const auto& mine = of(e);
        const auto& theirs = base.of(e);
        std::string p = ecosystemName(e);
        if (mine.enabled && !theirs.enabled) return p + ".enabled";
        for (const auto& d : theirs.deny) {
            bool kept = false;
            for (const auto& m : mine.deny) kept = kept || m.text == d.text;
            if (!kept) return p + ".deny (" + d.text + ")";
        }
        if (mine.minAgeDays < theirs.minAgeDays) return p + ".min_age_days";
        if (rank(mine.installScripts) > rank(theirs.installScripts)) return p + ".install_scripts";
        if (!mine.onlyBinary && theirs.onlyBinary) return p + ".only_binary";
        if (rank(mine.aptMode) > rank(theirs.aptMode)) return p + ".mode";
    }
    if (dryRun && !base.dryRun) return "dry_run";
    return "";
}

const EcosystemRules& PackageRules::of(Ecosystem e) const {
    return e == Ecosystem::npm ? npm : e == Ecosystem::pypi ? pypi : apt;
}

Verdict judge(Ecosystem e, const EcosystemRules& rules, const std::string& name,
              const std::string& version, std::optional<std::int64_t> publishedUnix,
              bool hasInstallScripts, std::int64_t nowUnix) {
    std::string label = name + (version.empty() ? "" : "@" + version);
    if (!rules.enabled)
        return {Gate::deny, "enabled",
                std::string(ecosystemName(e)) + " packages are disabled in this sandbox"};
    std::string normalized = normalizeName(e, name);
    for (const auto& d : rules.deny)
        if (d.matches(normalized, version))
            return {Gate::deny, "deny:" + d.text,
                    label + " is denied by the rule '" + d.text + "'"};
    if (e != Ecosystem::apt && rules.minAgeDays > 0 && !version.empty()) {
        if (!publishedUnix)
            return {Gate::deny, "min_age_days",
                    label +
                        " has no publication time in the registry, and this sandbox installs "
                        "only versions at least " +
                        std::to_string(rules.minAgeDays) + " days old"};
        std::int64_t age = nowUnix - *publishedUnix;
        if (age < std::int64_t(rules.minAgeDays) * 86400)
            return {Gate::deny, "min_age_days",
                    label + " was published " +
                        std::to_string(std::max<std::int64_t>(age, 0) / 3600) +
                        " hours ago; this sandbox installs only versions at least " +
                        std::to_string(rules.minAgeDays) + " days old"};
    }
    if (e == Ecosystem::npm && hasInstallScripts && rules.installScripts != Gate::allow)
        return {rules.installScripts, "install_scripts",
                label + " runs install scripts, which this sandbox " +
                    (rules.installScripts == Gate::deny ? "refuses"
                                                        : "lets through only with approval")};
    if (e == Ecosystem::pypi && hasInstallScripts && rules.onlyBinary)
        return {Gate::deny, "only_binary",
                label +
                    " is a source distribution (it runs code to build); this sandbox installs "
                    "only wheels"};
    if (e == Ecosystem::apt && rules.aptMode != Gate::allow)
        return {rules.aptMode, "mode",
                "Debian package " + label +
                    (rules.aptMode == Gate::deny ? " is refused: apt is closed in this sandbox"
                                                 : " needs an approver's consent in this sandbox")};
    return {Gate::allow, "", ""};
}

}  // namespace airlock::packages

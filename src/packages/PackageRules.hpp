#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "packages/VersionRange.hpp"

namespace airlock::packages {

enum class Ecosystem { npm, pypi, apt };
const char* ecosystemName(Ecosystem e);
std::optional<Ecosystem> parseEcosystem(const std::string& name);

// What a rule asks for a package that needs a human: refused, held for an
// approver, or let through.
enum class Gate { deny, approve, allow };
const char* gateName(Gate g);

// A deny entry: a name pattern ("left-pad", "@scope/*", "lodash*") and an
// optional version range after the name's "@" ("name@<2.0.0").
struct NameRule {
    std::string text;  // as given, for records
    std::string namePattern;
    VersionRange range;
    bool matches(const std::string& name, const std::string& version) const;
};

struct EcosystemRules {
    bool enabled = true;
    std::vector<NameRule> deny;
    unsigned minAgeDays = 3;
    Gate installScripts = Gate::deny;  // npm: versions with install scripts
    bool onlyBinary = true;            // pypi: sdists run code when installed
    Gate aptMode = Gate::approve;      // apt: every package download
};

// The package rules of a sandbox ("packages" at create):
//   {"npm":{"enabled":true,"deny":["name","name@<2.0.0","@scope/*"],
//           "min_age_days":3,"install_scripts":"deny"|"approve"|"allow"},
//    "pypi":{"enabled":true,"deny":[],"min_age_days":3,"only_binary":true},
//    "apt":{"enabled":true,"mode":"approve"|"allow"|"deny"},
//    "dry_run":false}
// Omitted fields keep their defaults (npm and PyPI on with a 3-day minimum
// age, install scripts and sdists refused, apt held for approval).
struct PackageRules;

// A change to one ecosystem's rules: what it names replaces the base's, its
// deny entries are added to the base's.
struct EcosystemRulesChange {
    std::optional<bool> enabled;
    std::vector<NameRule> deny;
    std::optional<unsigned> minAgeDays;
    std::optional<Gate> installScripts;
    std::optional<bool> onlyBinary;
    std::optional<Gate> aptMode;
    void applyTo(EcosystemRules& rules) const;
};

// The package rules a create request gives, over a tenant's: validated at
// the front door, applied by the controller over the tenant's rules.
struct PackageRulesChange {
    std::optional<EcosystemRulesChange> npm, pypi, apt;
    std::optional<bool> dryRun;

    // Throws Error(bad_request) naming the field; unknown fields are refused.
    static PackageRulesChange parse(const nlohmann::json& j);
    PackageRules over(const PackageRules& base) const;
};

struct PackageRules {
    EcosystemRules npm, pypi, apt;
    bool dryRun = false;

    // Throws Error(bad_request) naming the field; unknown fields are refused.
    static PackageRules parse(const nlohmann::json& j);
    // The same over `base` (a tenant's defaults): omitted fields keep the
    // base's values, and deny entries are added to the base's.
    static PackageRules parse(const nlohmann::json& j, const PackageRules& base);
    // The first field in which these rules are looser than `base`
    // ("npm.min_age_days", "dry_run"...), or "" when they are at least as strict.
    std::string looserThan(const PackageRules& base) const;
    static PackageRules fromStored(const std::string& json);  // lenient: defaults on damage
    nlohmann::json toJson() const;
    const EcosystemRules& of(Ecosystem e) const;
};

// Names compared as each ecosystem does: npm lower-case, PyPI as PEP 503
// normalizes (runs of - _ . become -), apt as is.
std::string normalizeName(Ecosystem e, const std::string& name);

// A decision on one version of one package.
struct Verdict {
    Gate gate = Gate::allow;
    std::string rule;    // what decided ("deny:name@<2", "min_age_days", "install_scripts"...)
    std::string reason;  // readable, printed by the package manager
};

// What the rules say of one version. publishedUnix: its publication time
// (nullopt when the registry did not say: refused under a minimum age).
Verdict judge(Ecosystem e, const EcosystemRules& rules, const std::string& name,
              const std::string& version, std::optional<std::int64_t> publishedUnix,
              bool hasInstallScripts, std::int64_t nowUnix);

}  // namespace airlock::packages

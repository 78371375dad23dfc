#include <gtest/gtest.h>

#include "core/Error.hpp"
#include "packages/PackageRules.hpp"
#include "packages/VersionRange.hpp"

namespace airlock::packages {
namespace {
using nlohmann::json;

TEST(VersionOrder, ReleasesPreReleasesAndPep440) {
    EXPECT_LT(compareVersions("1.2.3", "1.10.0"), 0);
    EXPECT_EQ(compareVersions("1.0", "1.0.0"), 0);
    EXPECT_LT(compareVersions("1.0.0-beta.2", "1.0.0-beta.10"), 0);
    EXPECT_LT(compareVersions("1.0.0-rc.1", "1.0.0"), 0);
    EXPECT_LT(compareVersions("2.0rc1", "2.0"), 0);
    EXPECT_GT(compareVersions("2.0.post1", "2.0"), 0);
    EXPECT_EQ(compareVersions("v1.2.3+build", "1.2.3"), 0);
    EXPECT_TRUE(isPrerelease("1.0.0-alpha"));
    EXPECT_FALSE(isPrerelease("1.0.0"));
}

TEST(VersionRange, ComparatorsAndAlternatives) {
    auto r = VersionRange::parse("<2.0.0");
    EXPECT_TRUE(r.contains("1.9.9"));
    EXPECT_FALSE(r.contains("2.0.0"));
    auto both = VersionRange::parse(">=1.2 <1.4");
    EXPECT_TRUE(both.contains("1.3.7"));
    EXPECT_FALSE(both.contains("1.4.0"));
    EXPECT_FALSE(both.contains("1.1"));
    auto alt = VersionRange::parse("=1.0.0 || >=3");
    EXPECT_TRUE(alt.contains("1.0.0"));
    EXPECT_TRUE(alt.contains("3.1"));
    EXPECT_FALSE(alt.contains("2.0.0"));
    EXPECT_TRUE(VersionRange::parse("").any());
    EXPECT_THROW(VersionRange::parse("<"), Error);
    EXPECT_THROW(VersionRange::parse("^1.0.0"), Error);
    EXPECT_THROW(VersionRange::parse("1.0 ||"), Error);
    EXPECT_THROW(VersionRange::parse(std::string(300, '1')), Error);
}

TEST(PackageRules, DefaultsAreStrict) {
    PackageRules r;
    EXPECT_TRUE(r.npm.enabled);
    EXPECT_EQ(r.npm.minAgeDays, 3u);
    EXPECT_EQ(r.npm.installScripts, Gate::deny);
    EXPECT_TRUE(r.pypi.onlyBinary);
    EXPECT_EQ(r.apt.aptMode, Gate::approve);
    EXPECT_FALSE(r.dryRun);
}

TEST(PackageRules, ParsesTheIssueShapeAndRoundTrips) {
    auto j = json::parse(
        R"({"npm":{"enabled":true,"deny":["name","name@<2.0.0","@scope/*"],"min_age_days":5,
        "install_scripts":"approve"},"pypi":{"enabled":false,"deny":["Django_Extensions"],"min_age_days":0,
        "only_binary":false},"apt":{"enabled":true,"mode":"allow"},"dry_run":true})");
    auto r = PackageRules::parse(j);
    EXPECT_EQ(r.npm.deny.size(), 3u);
    EXPECT_EQ(r.npm.minAgeDays, 5u);
    EXPECT_EQ(r.npm.installScripts, Gate::approve);
    EXPECT_FALSE(r.pypi.enabled);
    EXPECT_EQ(r.apt.aptMode, Gate::allow);
    EXPECT_TRUE(r.dryRun);
    auto again = PackageRules::parse(r.toJson());
    EXPECT_EQ(again.toJson(), r.toJson());
    EXPECT_EQ(PackageRules::fromStored("").toJson(), PackageRules().toJson());
    EXPECT_EQ(PackageRules::fromStored("{broken").toJson(), PackageRules().toJson());
}

TEST(PackageRules, RejectsUnknownFieldsAndBadValues) {
    for (const char* bad :
         {R"({"npm":{"colour":1}})", R"({"cargo":{}})", R"({"npm":{"min_age_days":-1}})",
          R"({"npm":{"install_scripts":"maybe"}})", R"({"npm":{"deny":"x"}})",
          R"({"npm":{"deny":[""]}})", R"({"npm":{"deny":["x@^1"]}})",
          R"({"apt":{"only_binary":true}})", R"({"dry_run":"yes"})", R"([])"}) {
        SCOPED_TRACE(bad);
        try {
            PackageRules::parse(json::parse(bad));
            ADD_FAILURE() << "accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::bad_request);
        }
    }
}

TEST(PackageRules, AChangeNamesOnlyWhatItChangesAndAppliesOverAnyBase) {
    auto change = PackageRulesChange::parse(
        json::parse(R"({"npm":{"deny":["b","a","b"],"min_age_days":9},"dry_run":false})"));
    ASSERT_TRUE(change.npm);
    EXPECT_FALSE(change.npm->enabled) << "not named: the base's stands";
    EXPECT_FALSE(change.pypi);
    EXPECT_EQ(change.npm->minAgeDays, 9u);
    EXPECT_EQ(change.dryRun, false);
    auto base = PackageRules::parse(json::parse(R"({"npm":{"deny":["a"],"enabled":false},"pypi":{"min_age_days":4}})"));
    auto r = change.over(base);
    std::vector<std::string> deny;
    for (const auto& d : r.npm.deny) deny.push_back(d.text);
    EXPECT_EQ(deny, (std::vector<std::string>{"a", "b"})) << "added once each, after the base's";
    EXPECT_FALSE(r.npm.enabled);
    EXPECT_EQ(r.npm.minAgeDays, 9u);
    EXPECT_EQ(r.pypi.minAgeDays, 4u);
    EXPECT_EQ(change.over(base).toJson(), PackageRules::parse(json::parse(
        R"({"npm":{"deny":["b","a","b"],"min_age_days":9},"dry_run":false})"), base).toJson());
    try {
        PackageRulesChange::parse(json::parse(R"({"npm":{"colour":1}})"));
        ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::bad_request);
    }
}

TEST(PackageRules, OverABaseAndLooserThan) {
    auto base = PackageRules::parse(
        json::parse(R"({"npm":{"deny":["a"],"min_age_days":5},"apt":{"mode":"deny"}})"));
    auto r = PackageRules::parse(json::parse(R"({"npm":{"deny":["b"]}})"), base);
    ASSERT_EQ(r.npm.deny.size(), 2u);
    EXPECT_EQ(r.npm.minAgeDays, 5u) << "omitted fields keep the base's";
    EXPECT_EQ(r.apt.aptMode, Gate::deny);
    EXPECT_EQ(r.looserThan(base), "");
    EXPECT_EQ(PackageRules().looserThan(base), "npm.deny (a)");
    auto lower = PackageRules::parse(json::parse(R"({"npm":{"min_age_days":1}})"), base);
    EXPECT_EQ(lower.looserThan(base), "npm.min_age_days");
    auto open = PackageRules::parse(json::parse(R"({"apt":{"mode":"approve"}})"), base);
    EXPECT_EQ(open.looserThan(base), "apt.mode");
    auto dry = PackageRules::parse(json::parse(R"({"dry_run":true})"), base);
    EXPECT_EQ(dry.looserThan(base), "dry_run");
}

TEST(PackageRules, JudgeOrderAndReasons) {
    auto r = PackageRules::parse(json::parse(
        R"({"npm":{"deny":["lodash@<4.17.21","@evil/*","left-*"]},"pypi":{"deny":["Django_Extensions"]}})"));
    std::int64_t now = 100 * 86400, old = 0;
    EXPECT_EQ(judge(Ecosystem::npm, r.npm, "lodash", "4.17.20", old, false, now).gate, Gate::deny);
    EXPECT_EQ(judge(Ecosystem::npm, r.npm, "lodash", "4.17.21", old, false, now).gate, Gate::allow);
    EXPECT_EQ(judge(Ecosystem::npm, r.npm, "@evil/thing", "1.0.0", old, false, now).rule,
              "deny:@evil/*");
    EXPECT_EQ(judge(Ecosystem::npm, r.npm, "left-pad", "1.0.0", old, false, now).gate, Gate::deny);
    EXPECT_EQ(judge(Ecosystem::npm, r.npm, "Left-Pad", "1.0.0", old, false, now).gate, Gate::deny)
        << "npm names compare lower-case";
    auto young = judge(Ecosystem::npm, r.npm, "ok", "1.0.0", now - 3600, false, now);
    EXPECT_EQ(young.rule, "min_age_days");
    EXPECT_NE(young.reason.find("3 days"), std::string::npos);
    EXPECT_EQ(judge(Ecosystem::npm, r.npm, "ok", "1.0.0", std::nullopt, false, now).rule,
              "min_age_days")
        << "no publication time: not old enough";
    EXPECT_EQ(judge(Ecosystem::npm, r.npm, "ok", "1.0.0", old, true, now).rule, "install_scripts");
    // PEP 503 normalization on both sides.
    EXPECT_EQ(judge(Ecosystem::pypi, r.pypi, "django.extensions", "3.0", old, false, now).gate,
              Gate::deny);
    EXPECT_EQ(judge(Ecosystem::pypi, r.pypi, "requests", "2.0", old, true, now).rule,
              "only_binary");
    EXPECT_EQ(judge(Ecosystem::apt, r.apt, "curl", "7.0", std::nullopt, false, now).gate,
              Gate::approve);
    PackageRules off;
    off.npm.enabled = false;
    EXPECT_EQ(judge(Ecosystem::npm, off.npm, "ok", "1.0.0", old, false, now).rule, "enabled");
}

}  // namespace
}  // namespace airlock::packages

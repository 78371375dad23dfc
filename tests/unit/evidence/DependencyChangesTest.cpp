#include <gtest/gtest.h>

#include "evidence/DependencyChanges.hpp"

namespace airlock {
namespace {

const DependencyChange* find(const std::vector<DependencyChange>& changes,
                             const std::string& name) {
    for (const auto& c : changes)
        if (c.name == name) return &c;
    return nullptr;
}

TEST(DependencyChanges, PackageLockV3AddedUpgradedDowngradedRemoved) {
    std::string before = R"({"name":"demo","lockfileVersion":3,"packages":{
      "":{"name":"demo","dependencies":{"left-pad":"^1.0.0"}},
      "node_modules/left-pad":{"version":"1.1.0","resolved":"x","integrity":"sha512-a"},
      "node_modules/old":{"version":"2.0.0"},
      "node_modules/down":{"version":"3.1.0"},
      "node_modules/@scope/thing":{"version":"1.0.0"}}})";
    std::string after = R"({"name":"demo","lockfileVersion":3,"packages":{
      "":{"name":"demo"},
      "node_modules/left-pad":{"version":"1.3.0"},
      "node_modules/down":{"version":"3.0.9"},
      "node_modules/@scope/thing":{"version":"1.0.0"},
      "node_modules/airlock-fixture-ok":{"version":"1.0.0"},
      "node_modules/a/node_modules/airlock-fixture-ok":{"version":"0.9.0"}}})";
    auto changes = dependencies::diff("package-lock.json", before, after);
    ASSERT_EQ(changes.size(), 4u);
    EXPECT_EQ(find(changes, "left-pad")->change, "upgraded");
    EXPECT_EQ(find(changes, "left-pad")->before, "1.1.0");
    EXPECT_EQ(find(changes, "left-pad")->after, "1.3.0");
    EXPECT_EQ(find(changes, "down")->change, "downgraded");
    EXPECT_EQ(find(changes, "old")->change, "removed");
    EXPECT_EQ(find(changes, "airlock-fixture-ok")->change, "added");
    EXPECT_EQ(find(changes, "airlock-fixture-ok")->after, "0.9.0, 1.0.0")
        << "every installed version";
    EXPECT_EQ(find(changes, "@scope/thing"), nullptr) << "unchanged";
    // A lockfile that appears (npm install in a repository without one).
    auto fresh = dependencies::diff("web/package-lock.json", "", after);
    EXPECT_EQ(find(fresh, "left-pad")->change, "added");
    EXPECT_EQ(fresh.front().file, "web/package-lock.json");
}

TEST(DependencyChanges, PackageLockV1AndPackageJsonSections) {
    auto v1 = dependencies::diff(
        "npm-shrinkwrap.json", R"({"lockfileVersion":1,"dependencies":{"a":{"version":"1.0.0"}}})",
        R"({"lockfileVersion":1,"dependencies":{"a":{"version":"1.2.0"},"b":{"version":"0.1.0"}}})");
    ASSERT_EQ(v1.size(), 2u);
    EXPECT_EQ(find(v1, "a")->change, "upgraded");
    auto manifest =
        dependencies::diff("package.json", R"({"dependencies":{"a":"^1.0.0"}})",
                           R"({"dependencies":{"a":"^2.0.0"},"devDependencies":{"jest":"^29"}})");
    ASSERT_EQ(manifest.size(), 2u);
    EXPECT_EQ(find(manifest, "a")->change, "changed") << "ranges are not ordered";
    EXPECT_NE(find(manifest, "jest")->after.find("devDependencies"), std::string::npos);
    auto junk = dependencies::diff("package-lock.json", "{}", "{not json");
    ASSERT_EQ(junk.size(), 1u);
    EXPECT_EQ(junk[0].change, "unreadable");
}

TEST(DependencyChanges, RequirementsWithPinsHashesMarkersAndContinuations) {
    std::string before =
        "# pinned\nrequests==2.31.0 \\\n    --hash=sha256:abc\nDjango>=4.2 ; "
        "python_version>'3'\n-r base.txt\nold_pkg==1.0\n";
    std::string after = "requests==2.32.3 --hash=sha256:def\ndjango>=4.2,<5\nNew.Pkg[extra]==0.1\n";
    auto changes = dependencies::diff("requirements-dev.txt", before, after);
    ASSERT_EQ(changes.size(), 4u);
    EXPECT_EQ(find(changes, "requests")->change, "upgraded");
    EXPECT_EQ(find(changes, "requests")->after, "2.32.3");
    EXPECT_EQ(find(changes, "django")->change, "changed");
    EXPECT_EQ(find(changes, "new-pkg")->change, "added") << "PEP 503 names";
    EXPECT_EQ(find(changes, "old-pkg")->change, "removed");
    EXPECT_EQ(changes[0].ecosystem, "pypi");
}

TEST(DependencyChanges, LockfilesAndManifestsByName) {
    EXPECT_TRUE(dependencies::isLockfile("a/b/package-lock.json"));
    EXPECT_TRUE(dependencies::isLockfile("poetry.lock"));
    EXPECT_FALSE(dependencies::isLockfile("package.json"));
    EXPECT_TRUE(dependencies::isManifest("package.json"));
    EXPECT_TRUE(dependencies::isManifest("requirements.txt"));
    EXPECT_TRUE(dependencies::isManifest("x/requirements-dev.txt"));
    EXPECT_FALSE(dependencies::isManifest("src/requirements.py"));
    EXPECT_TRUE(dependencies::diff("src/app.py", "a", "b").empty());
}

}  // namespace
}  // namespace airlock

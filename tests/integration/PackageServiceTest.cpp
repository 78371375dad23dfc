// The package proxy's decisions against real fixture registries on
// 127.0.0.1 (tests/fixtures/package-registry.py: npm packuments with "time",
// install scripts and integrity; a PEP 691 index with a wheel and an sdist;
// a flat apt repository). No VM: requests go straight to PackageService, as
// the guest's connections hand them over.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/Clock.hpp"
#include "packages/PackageService.hpp"
#include "support/BuildPaths.hpp"
#include "support/DaemonProcess.hpp"
#include "support/HelperProcess.hpp"
#include "support/TestEnv.hpp"

extern char** environ;

namespace airlock::packages {
namespace {
using nlohmann::json;
using namespace std::chrono_literals;

struct Record {
    std::string sandbox, type;
    json data;
};

class PackageServiceTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        fx = new Fixture();
        fx->npmPort = test::freePort();
        fx->pypiPort = test::freePort();
        fx->aptPort = test::freePort();
        fx->log = fx->tmp.path() + "/upstream.log";
        std::string script =
            test::sourceDir() + "/tests/fixtures/package-registry.py";
        fx->server = test::HelperProcess({"python3", script, "--npm-port",
                                          std::to_string(fx->npmPort), "--pypi-port",
                                          std::to_string(fx->pypiPort), "--apt-port",
                                          std::to_string(fx->aptPort), "--log", fx->log});
        ASSERT_TRUE(test::waitFor(
            [&] {
                return test::loopbackPortOpen(fx->npmPort) &&
                       test::loopbackPortOpen(fx->pypiPort) && test::loopbackPortOpen(fx->aptPort);
            },
            20s))
            << "the fixture registry did not start";
    }
    static void TearDownTestSuite() {
        delete fx;  // the registry stops with it
        fx = nullptr;
    }

    void SetUp() override {
        PackageServiceConfig c;
        c.upstreams = PackageUpstreams::parse(
            {"npm=http://127.0.0.1:" + std::to_string(fx->npmPort) + "/",
             "pypi=http://127.0.0.1:" + std::to_string(fx->pypiPort) + "/simple/",
             "apt=http://127.0.0.1:" + std::to_string(fx->aptPort) + "/fixture"});
        c.cacheDir = cacheDir.path();
        service = std::make_unique<PackageService>(
            c,
            [this](const std::string& sandbox, const std::string&, const std::string& type,
                   const json& data) {
                records.push_back({sandbox, type, data});
            },
            [this](const PackageApprovalRequest& q) {
                std::string key = q.name + "@" + q.version;
                asked.push_back(key);
                if (approved.count(key))
                    return PackageApprovalState{PackageApprovalState::State::approved, "apr-1"};
                return PackageApprovalState{PackageApprovalState::State::pending, "apr-1"};
            },
            [](const std::string& sandbox) {
                return sandbox == "sbx-test" ? std::string("npm install x") : std::string();
            });
    }

    GuestResponse get(Ecosystem e, const std::string& target, const PackageRules& rules = {},
                      const std::string& accept = "") {
        SandboxPackages s{"sbx-test", "t1", rules};
        return service->handle(s, GuestRequest{e, "GET", target, "127.0.0.1:4873", accept});
    }
    static std::string body(const GuestResponse& r) {
        if (r.filePath.empty()) return r.body;
        std::ifstream f(r.filePath, std::ios::binary);
        return std::string((std::istreambuf_iterator<char>(f)), {});
    }
    static int upstreamHits(const std::string& path) {
        std::ifstream f(fx->log);
        int n = 0;
        for (std::string line; std::getline(f, line);)
            if (line.find("\"" + path + "\"") != std::string::npos) ++n;
        return n;
    }
    const Record* last(const std::string& type) const {
        for (auto it = records.rbegin(); it != records.rend(); ++it)
            if (it->type == type) return &*it;
        return nullptr;
    }

    struct Fixture {
        test::TempDir tmp;
        int npmPort = 0, pypiPort = 0, aptPort = 0;
        std::string log;
        test::HelperProcess server;
    };
    static Fixture* fx;
    test::TempDir cacheDir;
    std::unique_ptr<PackageService> service;
    std::vector<Record> records;
    std::vector<std::string> asked;
    std::set<std::string> approved;
};
PackageServiceTest::Fixture* PackageServiceTest::fx = nullptr;

TEST_F(PackageServiceTest, YoungVersionIsFilteredAndLatestRepaired) {
    auto r = get(Ecosystem::npm, "/airlock-fixture-ok");
    ASSERT_EQ(r.status, 200) << r.body;
    auto doc = json::parse(r.body);
    EXPECT_TRUE(doc["versions"].contains("1.0.0"));
    EXPECT_FALSE(doc["versions"].contains("1.1.0")) << "published a day ago, under a 3-day minimum";
    EXPECT_FALSE(doc["time"].contains("1.1.0"));
    EXPECT_EQ(doc["dist-tags"]["latest"], "1.0.0");
    EXPECT_EQ(doc["versions"]["1.0.0"]["dist"]["tarball"],
              "http://127.0.0.1:4873/airlock-fixture-ok/-/airlock-fixture-ok-1.0.0.tgz");
    const Record* rec = last("package.metadata");
    ASSERT_TRUE(rec);
    EXPECT_EQ(rec->data["decision"], "allow");
    EXPECT_EQ(rec->data["hidden"][0]["rule"], "min_age_days");
    EXPECT_EQ(rec->data["command"], "npm install x") << "the command running in the sandbox";
}

TEST_F(PackageServiceTest, TarballOfAFilteredVersionIsRefusedWhenAskedDirectly) {
    auto r = get(Ecosystem::npm, "/airlock-fixture-ok/-/airlock-fixture-ok-1.1.0.tgz");
    EXPECT_EQ(r.status, 403);
    EXPECT_NE(r.body.find("days old"), std::string::npos) << r.body;
    EXPECT_EQ(upstreamHits("/airlock-fixture-ok/-/airlock-fixture-ok-1.1.0.tgz"), 0)
        << "a refused version is never downloaded";
    const Record* rec = last("package.artifact");
    ASSERT_TRUE(rec);
    EXPECT_EQ(rec->data["decision"], "deny");
    EXPECT_EQ(rec->data["version"], "1.1.0");
}

TEST_F(PackageServiceTest, AllowedTarballIsVerifiedCachedAndServedFromTheCache) {
    std::string path = "/airlock-fixture-ok/-/airlock-fixture-ok-1.0.0.tgz";
    int before = upstreamHits(path);
    auto first = get(Ecosystem::npm, path);
    ASSERT_EQ(first.status, 200) << first.body;
    EXPECT_EQ(last("package.artifact")->data["cache"], "miss");
    EXPECT_FALSE(last("package.artifact")->data["sha512"].get<std::string>().empty());
    auto second = get(Ecosystem::npm, path);
    ASSERT_EQ(second.status, 200);
    EXPECT_EQ(last("package.artifact")->data["cache"], "hit");
    EXPECT_EQ(upstreamHits(path), before + 1) << "the second request came from the cache";
    EXPECT_EQ(body(first), body(second));
    EXPECT_GT(body(first).size(), 100u);
}

TEST_F(PackageServiceTest, IntegrityMismatchIsRefusedAndNotCached) {
    std::string path = "/airlock-fixture-badsum/-/airlock-fixture-badsum-1.0.0.tgz";
    int before = upstreamHits(path);
    auto r = get(Ecosystem::npm, path);
    EXPECT_EQ(r.status, 502);
    EXPECT_NE(r.body.find("integrity"), std::string::npos) << r.body;
    const Record* rec = last("package.integrity_failed");
    ASSERT_TRUE(rec);
    EXPECT_EQ(rec->data["name"], "airlock-fixture-badsum");
    auto again = get(Ecosystem::npm, path);
    EXPECT_EQ(again.status, 502);
    EXPECT_EQ(upstreamHits(path), before + 2) << "nothing of a failed download is cached";
    std::size_t blobs = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(cacheDir.path() + "/blobs"))
        if (e.is_regular_file()) ++blobs;
    EXPECT_EQ(blobs, 0u);
}

TEST_F(PackageServiceTest, ScopedNamesInBothSpellings) {
    auto r = get(Ecosystem::npm, "/@airlock%2ffixture-scoped");
    ASSERT_EQ(r.status, 200) << r.body;
    auto doc = json::parse(r.body);
    std::string tarball = doc["versions"]["1.0.0"]["dist"]["tarball"];
    EXPECT_EQ(tarball, "http://127.0.0.1:4873/@airlock/fixture-scoped/-/fixture-scoped-1.0.0.tgz");
    auto t = get(Ecosystem::npm, "/@airlock/fixture-scoped/-/fixture-scoped-1.0.0.tgz");
    EXPECT_EQ(t.status, 200) << t.body;
    PackageRules rules = PackageRules::parse(json::parse(R"({"npm":{"deny":["@airlock/*"]}})"));
    auto denied = get(Ecosystem::npm, "/@airlock%2Ffixture-scoped", rules);
    EXPECT_EQ(denied.status, 403);
    EXPECT_NE(denied.body.find("@airlock/*"), std::string::npos) << denied.body;
}

TEST_F(PackageServiceTest, DeniedNamesAndInstallScriptsAreRefusedWithTheirReason) {
    PackageRules rules =
        PackageRules::parse(json::parse(R"({"npm":{"deny":["airlock-fixture-denied"]}})"));
    auto denied = get(Ecosystem::npm, "/airlock-fixture-denied", rules);
    EXPECT_EQ(denied.status, 403);
    EXPECT_NE(denied.body.find("denied by the rule 'airlock-fixture-denied'"), std::string::npos);
    auto scripts = get(Ecosystem::npm, "/airlock-fixture-scripts");
    EXPECT_EQ(scripts.status, 403);
    EXPECT_NE(scripts.body.find("install scripts"), std::string::npos) << scripts.body;
    // A version range: only the versions in it.
    rules = PackageRules::parse(
        json::parse(R"({"npm":{"deny":["airlock-fixture-ok@<1.0.1"],"min_age_days":0}})"));
    auto ranged = get(Ecosystem::npm, "/airlock-fixture-ok", rules);
    ASSERT_EQ(ranged.status, 200);
    auto doc = json::parse(ranged.body);
    EXPECT_FALSE(doc["versions"].contains("1.0.0"));
    EXPECT_TRUE(doc["versions"].contains("1.1.0"));
    EXPECT_EQ(doc["dist-tags"]["latest"], "1.1.0");
}

TEST_F(PackageServiceTest, ApprovalLetsOneVersionThrough) {
    PackageRules rules =
        PackageRules::parse(json::parse(R"({"npm":{"install_scripts":"approve"}})"));
    auto meta = get(Ecosystem::npm, "/airlock-fixture-scripts", rules);
    ASSERT_EQ(meta.status, 200) << "a version held for approval stays in the metadata";
    std::string path = "/airlock-fixture-scripts/-/airlock-fixture-scripts-1.0.0.tgz";
    auto held = get(Ecosystem::npm, path, rules);
    EXPECT_EQ(held.status, 403);
    EXPECT_EQ(json::parse(held.body)["approval_id"], "apr-1");
    EXPECT_NE(held.body.find("apr-1"), std::string::npos);
    EXPECT_EQ(last("package.artifact")->data["decision"], "approve");
    approved.insert("airlock-fixture-scripts@1.0.0");
    auto through = get(Ecosystem::npm, path, rules);
    EXPECT_EQ(through.status, 200) << through.body;
    EXPECT_EQ(last("package.artifact")->data["approval_id"], "apr-1");
    EXPECT_EQ(asked.size(), 2u);
}

TEST_F(PackageServiceTest, DryRunServesAndLogsWhatWouldBeRefused) {
    PackageRules rules = PackageRules::parse(
        json::parse(R"({"npm":{"deny":["airlock-fixture-denied"]},"dry_run":true})"));
    auto r = get(Ecosystem::npm, "/airlock-fixture-denied", rules);
    ASSERT_EQ(r.status, 200) << r.body;
    auto t =
        get(Ecosystem::npm, "/airlock-fixture-denied/-/airlock-fixture-denied-1.0.0.tgz", rules);
    EXPECT_EQ(t.status, 200);
    const Record* rec = last("package.artifact");
    EXPECT_EQ(rec->data["decision"], "allow");
    EXPECT_EQ(rec->data["would_decide"], "deny");
    EXPECT_EQ(rec->data["dry_run"], true);
}

TEST_F(PackageServiceTest, PublishAndAuditEndpointsAreRefused) {
    SandboxPackages s{"sbx-test", "t1", {}};
    auto put =
        service->handle(s, GuestRequest{Ecosystem::npm, "PUT", "/airlock-fixture-ok", "", ""});
    EXPECT_EQ(put.status, 405);
    auto audit = get(Ecosystem::npm, "/-/npm/v1/security/advisories/bulk");
    EXPECT_EQ(audit.status, 403);
}

TEST_F(PackageServiceTest, PypiHidesSdistsAndYoungFilesAndVerifiesWheels) {
    auto page = get(Ecosystem::pypi, "/simple/Airlock_Fixture.Py/", {},
                    "application/vnd.pypi.simple.v1+json");
    ASSERT_EQ(page.status, 200) << page.body;
    EXPECT_EQ(page.contentType, "application/vnd.pypi.simple.v1+json");
    auto doc = json::parse(page.body);
    ASSERT_EQ(doc["files"].size(), 1u) << page.body;
    EXPECT_EQ(doc["files"][0]["filename"], "airlock_fixture_py-1.0.0-py3-none-any.whl");
    EXPECT_EQ(page.body.find("tar.gz"), std::string::npos);
    std::string url = doc["files"][0]["url"];
    ASSERT_EQ(url.rfind("http://127.0.0.1:4873/files/", 0), 0u) << url;
    auto file = get(Ecosystem::pypi, url.substr(std::string("http://127.0.0.1:4873").size()));
    ASSERT_EQ(file.status, 200) << file.body;
    EXPECT_EQ(body(file).substr(0, 2), "PK");
    EXPECT_EQ(last("package.artifact")->data["version"], "1.0.0");
    // HTML for a client that does not ask for JSON, with the digest fragment.
    auto html = get(Ecosystem::pypi, "/simple/airlock-fixture-py/", {}, "text/html");
    EXPECT_EQ(html.contentType, "text/html");
    EXPECT_NE(html.body.find("#sha256="), std::string::npos);
    // Sdists allowed: two files for 1.0.0.
    PackageRules rules = PackageRules::parse(json::parse(R"({"pypi":{"only_binary":false}})"));
    auto withSdist = get(Ecosystem::pypi, "/simple/airlock-fixture-py/", rules,
                         "application/vnd.pypi.simple.v1+json");
    EXPECT_EQ(json::parse(withSdist.body)["files"].size(), 2u);
    // A file never offered is unknown.
    auto unknown =
        get(Ecosystem::pypi, "/files/" + std::string(64, 'a') + "/x-1.0-py3-none-any.whl");
    EXPECT_EQ(unknown.status, 404);
}

TEST_F(PackageServiceTest, AptDebsFollowTheModeAndIndicesPassThrough) {
    auto release = get(Ecosystem::apt, "/fixture/./Release");  // a flat repository ("deb URL ./")
    EXPECT_EQ(release.status, 200);
    EXPECT_NE(body(release).find("SHA256"), std::string::npos);
    auto missing = get(Ecosystem::apt, "/fixture/InRelease");
    EXPECT_EQ(missing.status, 404) << "apt falls back from InRelease to Release on a 404";
    std::string deb = "/fixture/airlock-fixture-hello_1.0_all.deb";
    auto held = get(Ecosystem::apt, deb);  // default: approve
    EXPECT_EQ(held.status, 403);
    EXPECT_EQ(last("package.artifact")->data["name"], "airlock-fixture-hello");
    PackageRules allow = PackageRules::parse(json::parse(R"({"apt":{"mode":"allow"}})"));
    auto got = get(Ecosystem::apt, deb, allow);
    ASSERT_EQ(got.status, 200) << got.body;
    EXPECT_EQ(body(got).substr(0, 7), "!<arch>");
    PackageRules deny = PackageRules::parse(json::parse(R"({"apt":{"mode":"deny"}})"));
    EXPECT_EQ(get(Ecosystem::apt, deb, deny).status, 403);
    EXPECT_EQ(get(Ecosystem::apt, "/elsewhere/Release").status, 404);
    EXPECT_EQ(get(Ecosystem::apt, "/fixture/../../etc/passwd").status, 404);
    EXPECT_EQ(get(Ecosystem::apt, "/fixture/%2e%2e/%2e%2e/etc/passwd").status, 404);
    EXPECT_EQ(get(Ecosystem::apt, "/fixture/a%2fb").status, 404);
    // Every package file is judged, not only .deb.
    auto dsc = get(Ecosystem::apt, "/fixture/hello_1.0.dsc", deny);
    EXPECT_EQ(dsc.status, 403);
    EXPECT_EQ(last("package.artifact")->data["version"], "1.0");
}

TEST_F(PackageServiceTest, UnreachableUpstreamIsA502NotACrash) {
    PackageServiceConfig c;
    c.upstreams =
        PackageUpstreams::parse({"npm=http://127.0.0.1:" + std::to_string(test::freePort()) + "/"});
    c.cacheDir = cacheDir.path() + "/other";
    PackageService down(c, nullptr, nullptr);
    auto r =
        down.handle({"sbx", "t", {}}, GuestRequest{Ecosystem::npm, "GET", "/left-pad", "", ""});
    EXPECT_EQ(r.status, 502);
    EXPECT_NE(r.body.find("connect"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace airlock::packages

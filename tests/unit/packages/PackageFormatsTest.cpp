// The formats the package proxy reads and rewrites: URLs, npm paths and
// packuments, PyPI index pages, SRI strings; and the cache's bounds.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "packages/HttpUrl.hpp"
#include "packages/NpmPackument.hpp"
#include "packages/PackageCache.hpp"
#include "packages/PypiIndex.hpp"
#include "support/TestEnv.hpp"

namespace airlock::packages {
namespace {
using nlohmann::json;

TEST(HttpUrl, ParseAndResolve) {
    auto u = HttpUrl::parse("HTTPS://Registry.Example:8443/simple/pkg/?x=1#frag");
    ASSERT_TRUE(u);
    EXPECT_EQ(u->scheme, "https");
    EXPECT_EQ(u->host, "registry.example");
    EXPECT_EQ(u->port, 8443u);
    EXPECT_EQ(u->target, "/simple/pkg/?x=1");
    EXPECT_FALSE(HttpUrl::parse("http://user:pw@host/"));
    EXPECT_FALSE(HttpUrl::parse("ftp://host/"));
    EXPECT_FALSE(HttpUrl::parse("http://host:99999/"));
    EXPECT_FALSE(HttpUrl::parse("http://host/a b"));
    auto page = *HttpUrl::parse("http://idx/simple/pkg/");
    EXPECT_EQ(page.resolve("../../packages/a.whl#sha256=00")->text(), "http://idx/packages/a.whl");
    EXPECT_EQ(page.resolve("/files/b.whl")->text(), "http://idx/files/b.whl");
    EXPECT_EQ(page.resolve("//other/c.whl")->text(), "http://other/c.whl");
    EXPECT_EQ(page.resolve("d.whl")->text(), "http://idx/simple/pkg/d.whl");
    EXPECT_EQ(HttpUrl::parse("http://[::1]:81/x")->origin(), "http://[::1]:81");
}

TEST(NpmPaths, PackagesAndTarballs) {
    EXPECT_EQ(parseNpmPackagePath("/left-pad"), "left-pad");
    EXPECT_EQ(parseNpmPackagePath("/@scope%2fname"), "@scope/name");
    EXPECT_EQ(parseNpmPackagePath("/@scope%2Fname"), "@scope/name");
    EXPECT_EQ(parseNpmPackagePath("/@scope/name"), "@scope/name");
    EXPECT_FALSE(parseNpmPackagePath("/-/v1/search"));
    EXPECT_FALSE(parseNpmPackagePath("/a/b/c"));
    EXPECT_FALSE(parseNpmPackagePath("/.hidden"));
    auto t = parseNpmTarballPath("/@scope/name/-/name-1.2.3-beta.1.tgz");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->name, "@scope/name");
    EXPECT_EQ(t->version, "1.2.3-beta.1");
    EXPECT_FALSE(parseNpmTarballPath("/name/-/other-1.0.0.tgz"));
    EXPECT_FALSE(parseNpmTarballPath("/name/-/../../etc/passwd"));
}

TEST(NpmPackument, FilterRemovesRepairsAndRewrites) {
    auto doc =
        json::parse(R"({"name":"p","dist-tags":{"latest":"2.0.0","next":"3.0.0-rc.1","old":"1.0.0"},
      "time":{"1.0.0":"2020-01-01T00:00:00.000Z","1.5.0":"2020-02-01T00:00:00Z","2.0.0":"2099-01-01T00:00:00Z",
              "3.0.0-rc.1":"2099-01-01T00:00:00Z"},
      "versions":{"1.0.0":{"dist":{"tarball":"https://up/p/-/p-1.0.0.tgz"}},
                  "1.5.0":{"dist":{"tarball":"https://up/p/-/p-1.5.0.tgz"},"scripts":{"postinstall":"x"}},
                  "2.0.0":{"dist":{"tarball":"https://up/p/-/p-2.0.0.tgz"}},
                  "3.0.0-rc.1":{"dist":{"tarball":"https://up/p/-/p-3.0.0-rc.1.tgz"}}}})");
    PackageRules rules;
    auto f = filterPackument(doc, "p", rules, 1'700'000'000, "http://127.0.0.1:4873");
    EXPECT_EQ(f.doc["versions"].size(), 1u);
    EXPECT_TRUE(f.doc["versions"].contains("1.0.0"));
    EXPECT_EQ(f.doc["dist-tags"], json({{"latest", "1.0.0"}, {"old", "1.0.0"}}));
    EXPECT_EQ(f.doc["versions"]["1.0.0"]["dist"]["tarball"],
              "http://127.0.0.1:4873/p/-/p-1.0.0.tgz");
    EXPECT_EQ(f.refused.size(), 3u);
    // latest is repaired within the maintainer's line, not onto a newer major.
    auto lines = json::parse(R"({"dist-tags":{"latest":"2.1.0","next":"3.0.0"},
      "time":{"2.0.0":"2020-01-01T00:00:00Z","2.1.0":"2099-01-01T00:00:00Z","3.0.0":"2020-01-01T00:00:00Z"},
      "versions":{"2.0.0":{},"2.1.0":{},"3.0.0":{}}})");
    auto fl = filterPackument(lines, "p", PackageRules(), 1'700'000'000, "http://h");
    EXPECT_EQ(fl.doc["dist-tags"]["latest"], "2.0.0");
    EXPECT_EQ(fl.doc["dist-tags"]["next"], "3.0.0");
    rules.dryRun = true;
    auto dry = filterPackument(doc, "p", rules, 1'700'000'000, "http://h");
    EXPECT_EQ(dry.doc["versions"].size(), 4u);
    EXPECT_EQ(dry.refused.size(), 3u);
    // Garbage in a packument is dropped, not trusted.
    auto junk = filterPackument(json::parse(R"({"versions":{"1.0.0":7},"dist-tags":{"latest":5}})"),
                                "p", PackageRules(), 0, "http://h");
    EXPECT_TRUE(junk.doc["versions"].empty());
}

TEST(Sri, Sha512Hex) {
    // sha512("") in SRI form.
    std::string sri =
        "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/"
        "SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg==";
    EXPECT_EQ(sriSha512Hex(sri),
              "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff83"
              "18d2877eec2f"
              "63b931bd47417a81a538327af927da3e");
    EXPECT_EQ(sriSha512Hex("sha1-abc " + sri).size(), 128u);
    EXPECT_EQ(sriSha512Hex("sha256-abc"), "");
    EXPECT_EQ(sriSha512Hex("sha512-short"), "");
}

TEST(PypiIndex, HtmlAndJsonPages) {
    auto page = *HttpUrl::parse("http://idx/simple/pkg/");
    std::string html = R"(<html><body>
      <a href="../../files/pkg-1.0-py3-none-any.whl#sha256=)" +
                       std::string(64, 'a') +
                       R"(" data-requires-python="&gt;=3.8">pkg-1.0-py3-none-any.whl</a>
      <A HREF='/files/pkg-1.0.tar.gz#sha256=)" +
                       std::string(64, 'b') + R"(' data-yanked>pkg-1.0.tar.gz</A>
      <a href="/files/nodigest-1.0.zip">nodigest-1.0.zip</a><abbr>x</abbr></body></html>)";
    auto files = parsePypiIndex(html, "text/html; charset=utf-8", page);
    ASSERT_EQ(files.size(), 3u);
    EXPECT_EQ(files[0].url, "http://idx/files/pkg-1.0-py3-none-any.whl");
    EXPECT_EQ(files[0].requiresPython, ">=3.8");
    EXPECT_EQ(files[0].version, "1.0");
    EXPECT_FALSE(files[0].sdist);
    EXPECT_TRUE(files[1].sdist);
    EXPECT_EQ(files[1].yanked, true);
    EXPECT_EQ(files[2].sha256, "");
    PackageRules rules;
    rules.pypi.minAgeDays = 0;
    auto f = filterPypiFiles(files, "pkg", rules, 0);
    ASSERT_EQ(f.kept.size(), 1u);
    EXPECT_EQ(f.refused.size(), 2u) << "the sdist (only_binary) and the file without a digest";
    auto json = renderPypiJson("pkg", f.kept, "http://127.0.0.1:3141/files");
    EXPECT_NE(json.find("/files/" + std::string(64, 'a') + "/pkg-1.0-py3-none-any.whl"),
              std::string::npos);
    auto again = parsePypiIndex(json, "application/vnd.pypi.simple.v1+json", page);
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0].sha256, std::string(64, 'a'));
    auto rendered = renderPypiHtml("pkg", f.kept, "http://h/files");
    EXPECT_EQ(parsePypiIndex(rendered, "text/html", page).size(), 1u);
    EXPECT_THROW(parsePypiIndex("[]", "application/json", page), std::exception);
}

TEST(PypiIndex, FileNameVersions) {
    bool sdist = false;
    EXPECT_EQ(pypiFileVersion("numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.whl", sdist),
              "1.26.4");
    EXPECT_FALSE(sdist);
    EXPECT_EQ(pypiFileVersion("my-pkg-name-2.0.tar.gz", sdist), "2.0");
    EXPECT_TRUE(sdist);
    EXPECT_EQ(pypiFileVersion("README.txt", sdist), "");
}

TEST(PackageCache, BlobsAreEvictedLeastRecentlyUsedFirst) {
    test::TempDir dir;
    PackageCache cache(dir.path(), 2500, std::chrono::seconds(60));
    auto put = [&](char c) {
        auto staging = cache.stagingPath();
        std::ofstream(staging) << std::string(1000, c);
        return cache.adoptBlob(staging, "sha256", std::string(64, c));
    };
    put('a');
    put('b');
    ASSERT_TRUE(cache.findBlob("sha256", std::string(64, 'a')));  // a is now the most recent
    std::filesystem::last_write_time(
        dir.path() + "/blobs/sha256/" + std::string(64, 'b'),
        std::filesystem::file_time_type::clock::now() - std::chrono::hours(1));
    put('c');
    EXPECT_TRUE(cache.findBlob("sha256", std::string(64, 'a')));
    EXPECT_FALSE(cache.findBlob("sha256", std::string(64, 'b')));
    EXPECT_TRUE(cache.findBlob("sha256", std::string(64, 'c')));
    EXPECT_LE(cache.blobBytes(), 2500u);
    EXPECT_FALSE(cache.findBlob("sha256", "../../etc/passwd"));
    cache.putMetadata("k", {"body", "text/plain"});
    EXPECT_EQ(cache.findMetadata("k")->body, "body");
    PackageCache expiring(dir.path() + "/2", 1000, std::chrono::seconds(0));
    expiring.putMetadata("k", {"body", "text/plain"});
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_FALSE(expiring.findMetadata("k"));
}

}  // namespace
}  // namespace airlock::packages

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/Error.hpp"
#include "evidence/TarGzReader.hpp"
#include "evidence/TarGzWriter.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

std::string readFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(TarGz, TheSameFilesInAnyOrderGiveTheSameBytes) {
    TarGzWriter a(1700000000), b(1700000000);
    a.add("evd/b.txt", "bee");
    a.add("evd/a/x.json", "{}");
    b.add("evd/a/x.json", "{}");
    b.add("evd/b.txt", "bee");
    EXPECT_EQ(a.finish(), b.finish());
    TarGzWriter c(1700000001);
    c.add("evd/a/x.json", "{}");
    c.add("evd/b.txt", "bee");
    EXPECT_NE(a.finish(), c.finish()) << "the time is part of the archive";
}

TEST(TarGz, GnuTarReadsItWithRootOwnersSortedEntriesAndLongNames) {
    test::TempDir dir;
    std::string longName =
        "evd/artifacts/" + std::string(90, 'd') + "/" + std::string(60, 'f') + ".txt";
    std::string unsplittable = "evd/" + std::string(120, 'n') + ".txt";
    TarGzWriter w(1700000000);
    w.add("evd/manifest.json", "{\"a\":1}\n");
    w.add(longName, "long");
    w.add(unsplittable, "pax");
    w.add("evd/commands/1.stdout", std::string(70000, 'o'));
    std::ofstream(dir.path() + "/b.tar.gz", std::ios::binary) << w.finish();
    std::string listing =
        test::commandOutput("tar -tvzf " + dir.path() + "/b.tar.gz --numeric-owner 2>&1");
    EXPECT_NE(listing.find("0/0"), std::string::npos) << listing;
    EXPECT_EQ(listing.find("1000/"), std::string::npos) << listing;
    EXPECT_NE(listing.find("2023-11-14"), std::string::npos) << "the fixed time: " << listing;
    ASSERT_EQ(test::commandOutput("mkdir " + dir.path() + "/x && tar -xzf " + dir.path() +
                                  "/b.tar.gz -C " + dir.path() + "/x 2>&1"),
              "");
    EXPECT_EQ(readFile(dir.path() + "/x/" + longName), "long");
    EXPECT_EQ(readFile(dir.path() + "/x/" + unsplittable), "pax");
    EXPECT_EQ(readFile(dir.path() + "/x/evd/commands/1.stdout").size(), 70000u);
    std::string names = test::commandOutput("tar -tzf " + dir.path() + "/b.tar.gz");
    EXPECT_LT(names.find("evd/\n"), names.find("evd/commands/\n"))
        << "a directory before its files";
    EXPECT_LT(names.find("evd/commands/1.stdout"), names.find("evd/manifest.json"));

    // Our reader reads what we wrote, and what GNU tar writes.
    auto files = TarGzReader::read(w.finish());
    EXPECT_EQ(files.size(), 4u);
    EXPECT_EQ(files[unsplittable], "pax");
    EXPECT_EQ(files[longName], "long");
    test::commandOutput("cd " + dir.path() + "/x && tar --format=gnu -czf ../gnu.tar.gz evd");
    auto gnu = TarGzReader::read(readFile(dir.path() + "/gnu.tar.gz"));
    EXPECT_EQ(gnu[unsplittable], "pax");
    EXPECT_EQ(gnu[longName], "long");
    test::commandOutput("cd " + dir.path() + "/x && tar --format=pax -czf ../pax.tar.gz evd");
    EXPECT_EQ(TarGzReader::read(readFile(dir.path() + "/pax.tar.gz"))[unsplittable], "pax");
}

TEST(TarGz, PathsThatEscapeOrRepeatAreRefusedOnBothSides) {
    TarGzWriter w(0);
    for (const char* bad : {"/abs", "../up", "a/../b", "a//b", "", "a/", "./a"})
        EXPECT_EQ(test::codeOf([&] { w.add(bad, "x"); }), ErrorCode::bad_request) << bad;

    test::TempDir dir;
    test::commandOutput("mkdir -p " + dir.path() + "/s/d && echo hi > " + dir.path() +
                        "/s/d/f && ln -s /etc/passwd " + dir.path() + "/s/d/link");
    test::commandOutput("cd " + dir.path() + "/s && tar -czf ../link.tar.gz d");
    EXPECT_EQ(test::codeOf([&] { TarGzReader::read(readFile(dir.path() + "/link.tar.gz")); }),
              ErrorCode::bad_request)
        << "a symlink has no place in a bundle";
    test::commandOutput(
        "python3 -c \"import tarfile,io; t=tarfile.open('" + dir.path() +
        "/dots.tar.gz','w:gz'); i=tarfile.TarInfo('d/../../f'); i.size=2; t.addfile(i, "
        "io.BytesIO(b'hi')); "
        "t.close()\"");
    EXPECT_EQ(test::codeOf([&] { TarGzReader::read(readFile(dir.path() + "/dots.tar.gz")); }),
              ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { TarGzReader::read("not gzip at all"); }), ErrorCode::bad_request);
    std::string gz = w.finish();
    EXPECT_EQ(test::codeOf([&] { TarGzReader::read(gz.substr(0, gz.size() / 2)); }),
              ErrorCode::bad_request)
        << "a cut archive";
}

TEST(TarGz, UnpackingStopsAtTheLimits) {
    TarGzWriter w(0);
    w.add("big", std::string(1 << 20, 'z'));  // compresses to almost nothing
    std::string gz = w.finish();
    EXPECT_LT(gz.size(), 10000u);
    EXPECT_EQ(test::codeOf([&] {
                  TarGzReader::read(gz, {512 * 1024, 100});
              }),
              ErrorCode::bad_request);
    TarGzWriter many(0);
    for (int i = 0; i < 50; ++i) many.add("f" + std::to_string(i), "x");
    EXPECT_EQ(test::codeOf([&] {
                  TarGzReader::read(many.finish(), {1 << 20, 20});
              }),
              ErrorCode::bad_request);
    EXPECT_EQ(TarGzReader::read(many.finish(), {1 << 20, 100}).size(), 50u);
}

}  // namespace
}  // namespace airlock

#include "workspace/GitMirrors.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "support/TestEnv.hpp"

namespace airlock::workspace {
namespace {
namespace fs = std::filesystem;
using test::codeOf;

void writeFile(const fs::path& p, std::size_t bytes) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << std::string(bytes, 'x');
}

class GitMirrorsTest : public ::testing::Test {
  protected:
    WorkspaceConfig config(std::chrono::seconds retention = std::chrono::hours(1)) {
        WorkspaceConfig c;
        c.dataDir = dir.path();
        c.mirrorRetention = retention;
        return c;
    }
    // A mirror as a fetch leaves it, last used `age` ago.
    static void fakeMirror(const std::string& path, std::chrono::hours age) {
        writeFile(fs::path(path) / "HEAD", 10);
        writeFile(fs::path(path) / "airlock-last-used", 10);
        fs::last_write_time(fs::path(path) / "airlock-last-used",
                            fs::file_time_type::clock::now() - age);
    }
    test::TempDir dir;
};

TEST_F(GitMirrorsTest, StartsWithAnOwnerOnlyGitDirectoryAndNoScratchOfARunBefore) {
    writeFile(fs::path(dir.path()) / "git/t/scratch/co-1/file", 5);
    writeFile(fs::path(dir.path()) / "git/t/mirrors/m.git/HEAD", 5);
    GitMirrors mirrors(config(), nullptr);
    EXPECT_FALSE(fs::exists(fs::path(dir.path()) / "git/t/scratch"));
    EXPECT_TRUE(fs::exists(fs::path(dir.path()) / "git/t/mirrors/m.git/HEAD"));
    struct stat st {};
    ASSERT_EQ(::stat((dir.path() + "/git").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(GitMirrorsTest, EachTenantAndRemoteHasItsOwnPlace) {
    GitMirrors mirrors(config(), nullptr);
    auto a = RemoteUrl::parse("https://git.example/org/app.git");
    auto b = RemoteUrl::parse("https://git.example/org/lib.git");
    EXPECT_NE(mirrors.tenantDir("t1"), mirrors.tenantDir("t2"));
    EXPECT_EQ(mirrors.mirrorPath("t1", a).rfind(mirrors.tenantDir("t1") + "/mirrors/", 0), 0u);
    EXPECT_NE(mirrors.mirrorPath("t1", a), mirrors.mirrorPath("t1", b));
    EXPECT_NE(mirrors.mirrorPath("t1", a), mirrors.mirrorPath("t2", a))
        << "a tenant never reads another's mirror";
    EXPECT_EQ(mirrors.tenantDir("t1").find("t1"), std::string::npos) << "named by a hash";
}

TEST_F(GitMirrorsTest, TenantUsageCountsOnlyTheTenantsOwnBytes) {
    GitMirrors mirrors(config(), nullptr);
    writeFile(fs::path(mirrors.tenantDir("t1")) / "mirrors/a.git/objects/pack/p.pack", 3000);
    writeFile(fs::path(mirrors.tenantDir("t1")) / "work.git/objects/ab/cdef", 500);
    writeFile(fs::path(mirrors.tenantDir("t2")) / "mirrors/b.git/objects/pack/p.pack", 7000);
    EXPECT_EQ(mirrors.tenantUsage("t1"), 3500u);
    EXPECT_EQ(mirrors.tenantUsage("t2"), 7000u);
    EXPECT_EQ(mirrors.tenantUsage("t3"), 0u);
}

TEST_F(GitMirrorsTest, AStoppedFetchLeavesNoPartialPack) {
    fs::path pack = fs::path(dir.path()) / "m.git/objects/pack";
    for (const char* name : {"pack-a.pack", "pack-a.idx", "pack-a.rev", "pack-k.keep",
                             "pack-b.pack", "tmp_pack_XYZ", "pack-c.pack.lock"})
        writeFile(pack / name, 10);
    GitMirrors::removePartialPacks((fs::path(dir.path()) / "m.git").string());
    std::set<std::string> left;
    for (const auto& e : fs::directory_iterator(pack)) left.insert(e.path().filename().string());
    EXPECT_EQ(left, (std::set<std::string>{"pack-a.pack", "pack-a.idx", "pack-a.rev", "pack-k.keep"}))
        << "a .pack without its .idx and the indexer's temporaries go";
}

TEST_F(GitMirrorsTest, FetchesAreRefusedBeforeAnyConnectionWhenABoundIsReached) {
    // Each bound answers before anything is dialled (nothing listens there).
    bool diskChecked = false;
    GitMirrors full(config(), [&](const std::string& what, std::uint64_t) {
        diskChecked = true;
        throw Error(ErrorCode::insufficient_storage, what + " needs room");
    });
    EXPECT_EQ(codeOf([&] { full.fetch("t1", RemoteUrl::parse("https://93.184.216.34/a.git"), std::nullopt); }),
              ErrorCode::insufficient_storage);
    EXPECT_TRUE(diskChecked);

    auto c = config();
    c.tenantQuotaBytes = 1000;
    GitMirrors quota(c, nullptr);
    writeFile(fs::path(quota.tenantDir("t1")) / "mirrors/old.git/objects/pack/p.pack", 1000);
    EXPECT_EQ(codeOf([&] { quota.fetch("t1", RemoteUrl::parse("https://93.184.216.34/a.git"), std::nullopt); }),
              ErrorCode::quota_exceeded);
    EXPECT_FALSE(fs::exists(quota.mirrorPath("t1", RemoteUrl::parse("https://93.184.216.34/a.git"))));

    EXPECT_EQ(codeOf([&] { quota.fetch("t1", RemoteUrl::parse("https://127.0.0.1/a.git"), std::nullopt); }),
              ErrorCode::forbidden)
        << "loopback is refused as egress refuses it";
}

TEST_F(GitMirrorsTest, RetentionRemovesOnlyOldMirrorsNoWorkspaceNamesAndTheirAlternates) {
    GitMirrors mirrors(config(std::chrono::hours(1)), nullptr);
    auto used = RemoteUrl::parse("https://git.example/org/used.git");
    auto old = RemoteUrl::parse("https://git.example/org/old.git");
    auto recent = RemoteUrl::parse("https://git.example/org/recent.git");
    fakeMirror(mirrors.mirrorPath("t1", used), std::chrono::hours(48));
    fakeMirror(mirrors.mirrorPath("t1", old), std::chrono::hours(48));
    fakeMirror(mirrors.mirrorPath("t1", recent), std::chrono::hours(0));
    {
        auto work = mirrors.openWorkRepo(
            "t1", {mirrors.mirrorPath("t1", used), mirrors.mirrorPath("t1", old)});
        ASSERT_TRUE(work);
    }
    EXPECT_EQ(mirrors.prune({used.text}), 1u);
    EXPECT_TRUE(fs::exists(mirrors.mirrorPath("t1", used)));
    EXPECT_FALSE(fs::exists(mirrors.mirrorPath("t1", old)));
    EXPECT_TRUE(fs::exists(mirrors.mirrorPath("t1", recent)));
    std::ifstream in(mirrors.tenantDir("t1") + "/work.git/objects/info/alternates");
    std::string alternates((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(alternates, mirrors.mirrorPath("t1", used) + "/objects\n");

    GitMirrors keepAll(config(std::chrono::seconds(0)), nullptr);
    EXPECT_EQ(keepAll.prune({}), 0u) << "no retention: nothing goes";
    EXPECT_TRUE(fs::exists(mirrors.mirrorPath("t1", recent)));
}

TEST_F(GitMirrorsTest, TheWorkStoreReadsEachMirrorOnce) {
    GitMirrors mirrors(config(), nullptr);
    std::string a = mirrors.tenantDir("t1") + "/mirrors/a.git", b = mirrors.tenantDir("t1") + "/mirrors/b.git";
    { auto w = mirrors.openWorkRepo("t1", {a}); }
    { auto w = mirrors.openWorkRepo("t1", {a, b}); }
    { auto w = mirrors.openWorkRepo("t1", {b}); }
    std::ifstream in(mirrors.tenantDir("t1") + "/work.git/objects/info/alternates");
    std::string alternates((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(alternates, a + "/objects\n" + b + "/objects\n");
    EXPECT_FALSE(fs::exists(mirrors.tenantDir("t2") + "/work.git")) << "per tenant";
}

}  // namespace
}  // namespace airlock::workspace

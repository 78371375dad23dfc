// Issue 29's git attacks at the host's git layer, against the real fixture
// git server (tests/fixtures/git-http-server.py) on loopback: a credential
// over plain http on IPv6 (9), submodules that would get the tenant's
// credential (10), a remote that would fill the host's disk (5). The
// workspace service runs over the fake hypervisor; nothing here boots a VM.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/Sha256.hpp"
#include "egress/AddressPolicy.hpp"
#include "store/CredentialStore.hpp"
#include "store/WorkspaceStore.hpp"
#include "support/GitServer.hpp"
#include "unit/controller/ControllerFixture.hpp"
#include "workspace/GitRemoteAccess.hpp"
#include "workspace/GitSocket.hpp"
#include "workspace/RemoteUrl.hpp"
#include "workspace/WorkingTree.hpp"
#include "workspace/WorkspaceService.hpp"

extern char** environ;

namespace airlock::workspace {
namespace {
namespace fs = std::filesystem;
namespace ip = boost::asio::ip;
using test::GitServer;
using namespace std::chrono_literals;
using test::codeOf;

egress::AddressPolicy opened(std::vector<std::string> cidrs) {
    std::vector<egress::CidrRange> ranges;
    for (const auto& c : cidrs) ranges.push_back(egress::CidrRange::parse(c));
    return egress::AddressPolicy(ranges);
}

// A credential for the fixture server, for `ownPath` and `scope`.
BrokeredCredential credentialOf(const GitServer& server, const std::string& ownPath,
                                std::vector<std::string> scope = {}) {
    return BrokeredCredential{"https-basic", server.hostPort(), "git", server.password, "",
                              ownPath, std::move(scope)};
}

Repository bareRepo(const std::string& path) {
    git_repository* raw = nullptr;
    initGit();
    EXPECT_EQ(git_repository_init(&raw, path.c_str(), 1), 0);
    return Repository(raw);
}

// ------------------------------------------------------------------ attack 9

TEST(RecordIntegrity, Attack9_ACredentialOverPlainHttpOnIpv6GoesOnlyToRangesTheOperatorOpened) {
    auto v4only = opened({"127.0.0.1/32"});
    // Before: only IPv4 addresses were checked, so any IPv6 address (a
    // public one egress allows, or loopback) passed the check.
    for (const char* url : {"http://[::1]:9418/x.git", "http://[2606:4700:4700::1111]/x.git",
                            "http://[::ffff:8.8.8.8]/x.git", "http://8.8.8.8/x.git"})
        EXPECT_EQ(codeOf([&] { requireClearTextAllowed(RemoteUrl::parse(url), v4only); }),
                  ErrorCode::forbidden)
            << url;
    EXPECT_NO_THROW(requireClearTextAllowed(RemoteUrl::parse("http://127.0.0.1:9/x.git"), v4only));
    EXPECT_NO_THROW(
        requireClearTextAllowed(RemoteUrl::parse("http://[::ffff:127.0.0.1]:9/x.git"), v4only));
    auto v6 = opened({"::1/128"});
    EXPECT_NO_THROW(requireClearTextAllowed(RemoteUrl::parse("http://[::1]:9/x.git"), v6));
    EXPECT_EQ(codeOf([&] { requireClearTextAllowed(RemoteUrl::parse("http://127.0.0.1/x"), v6); }),
              ErrorCode::forbidden);

    // At connect time too (a name that resolves to an opened address for
    // the check and another for the connection): a public IPv6 address is
    // fine for https, never for a clear-text credential.
    auto pub6 = ip::make_address("2606:4700:4700::1111");
    EXPECT_FALSE(gitConnectRefusal(pub6, v4only, false).has_value());
    EXPECT_TRUE(gitConnectRefusal(pub6, v4only, true).has_value());
    EXPECT_TRUE(gitConnectRefusal(ip::make_address("::1"), v4only, true).has_value());
    EXPECT_FALSE(gitConnectRefusal(ip::make_address("::1"), v6, true).has_value());
    EXPECT_FALSE(ClearTextCredential::active());
    {
        ClearTextCredential on(true);
        EXPECT_TRUE(ClearTextCredential::active());
        ClearTextCredential nested(false);
        EXPECT_TRUE(ClearTextCredential::active()) << "a nested scope never lifts the guard";
    }
    EXPECT_FALSE(ClearTextCredential::active());

    // Over [::1] for real: the operator opened ::1, so the credential goes.
    GitServer server("::1");
    ASSERT_TRUE(server.up) << "the fixture server did not bind ::1";
    installGitSocket(v6, 10s, 30s);
    test::TempDir dir;
    auto mirror = bareRepo(dir.path() + "/m.git");
    GitRemoteAccess(RemoteUrl::parse(server.base() + "/demo.git"), credentialOf(server, "/demo.git"))
        .fetchInto(mirror.get());
    auto seen = server.requests("/demo.git");
    EXPECT_NE(std::find(seen.begin(), seen.end(), "AUTH"), seen.end());
    // Opened for IPv4 only: nothing reaches [::1], with or without a credential.
    installGitSocket(v4only, 10s, 30s);
    auto before = server.requests("/").size();
    auto other = bareRepo(dir.path() + "/o.git");
    EXPECT_EQ(codeOf([&] {
                  GitRemoteAccess(RemoteUrl::parse(server.base() + "/demo.git"),
                                  credentialOf(server, "/demo.git"))
                      .fetchInto(other.get());
              }),
              ErrorCode::unprocessable);
    EXPECT_EQ(server.requests("/").size(), before) << "a request reached [::1]";
    installGitSocket(egress::AddressPolicy(), 30s, 120s);
}

// ----------------------------------------------------------------- attack 10

TEST(RecordIntegrity, Attack10_ACredentialCoversItsOwnRepositoryAndItsScopeOnly) {
    auto own =
        BrokeredCredential{"https-basic", "git.example.com", "git", "s", "", "/org/app.git", {}};
    auto at = [](const std::string& u) { return RemoteUrl::parse(u); };
    EXPECT_TRUE(own.covers(at("https://git.example.com/org/app.git")));
    auto app = at("https://git.example.com/org/app.git");
    for (const char* rel : {"../private.git", "./app.git/../../private.git", "../../x/y.git"}) {
        try {
            EXPECT_FALSE(own.covers(app.resolve(rel))) << rel;
        } catch (const Error&) {  // climbing above the host: refused outright
        }
    }
    for (const char* u :
         {"https://git.example.com/org/lib.git", "https://git.example.com/org/app.git/../lib.git",
          "https://git.example.com/org/%61pp.git", "https://git.example.com/org//app.git",
          "https://other.example.com/org/app.git", "https://git.example.com:444/org/app.git"})
        EXPECT_FALSE(own.covers(at(u))) << u;
    auto scoped = own;
    scoped.scope = {"/org/"};
    EXPECT_TRUE(scoped.covers(at("https://git.example.com/org/lib.git")));
    for (const char* u :
         {"https://git.example.com/orgx/lib.git", "https://git.example.com/org/../other/x.git",
          "https://git.example.com/org/./lib.git", "https://git.example.com/org/%2e%2e/x.git",
          "https://git.example.com/other/x.git", "https://evil.example.com/org/lib.git"})
        EXPECT_FALSE(scoped.covers(at(u))) << u;
    auto noSlash = own;
    noSlash.scope = {"/org"};
    EXPECT_FALSE(noSlash.covers(at("https://git.example.com/organisation/x.git")));
    EXPECT_TRUE(noSlash.covers(at("https://git.example.com/org/x.git")));
    for (const char* bad : {"org/", "/org/../", "/a/%2e", "/a?b", "/a//b", ""})
        EXPECT_FALSE(RemoteUrl::validScopePrefix(bad)) << bad;
    // The transport's last word: the credential never leaves for another
    // repository, whatever its caller asked.
    EXPECT_EQ(codeOf([&] { GitRemoteAccess(at("https://git.example.com/org/lib.git"), own); }),
              ErrorCode::forbidden);
}

// The service over the fake hypervisor, its stores on the fixture's database.
class GitWorkspaces : public test::ControllerFixture {
  protected:
    GitWorkspaces() {
        std::array<unsigned char, 32> key{};
        key.fill(9);
        cipher = std::make_shared<const SecretCipher>(key);
    }
    static WorkspaceConfig loopbackOpened() {
        WorkspaceConfig c;
        c.addressPolicy = opened({"127.0.0.1/32"});
        return c;
    }
    std::unique_ptr<WorkspaceService> service(WorkspaceConfig config) {
        config.dataDir = dir.path();
        config.cipher = cipher;
        return std::make_unique<WorkspaceService>(config, controller->workspaceSandboxes(), credentials, workspaces);
    }
    CreateSandboxRequest request(const std::string& repo, const std::string& credential) {
        CreateSandboxRequest r;
        r.templateName = "minimal";
        WorkspaceSpec w;
        w.repo = repo;
        w.branch = "agent/t";
        w.credential = credential;
        w.path = dir.path() + "/ws";
        r.workspace = w;
        return r;
    }
    std::shared_ptr<const SecretCipher> cipher;
    CredentialStore credentials{*db};
    WorkspaceStore workspaces{*db};
};

TEST_F(GitWorkspaces, Attack10_AHostileGitmodulesGetsNoCredentialForAnotherRepository) {
    GitServer server;
    auto ws = service(loopbackOpened());
    ws->credentials().add("t1",
                      {"fx", "https-basic", server.hostPort(), "git", server.password, "", {}});
    // team/hostile.git's .gitmodules points at ../../private.git (another
    // owner's) and ../notes.git (its neighbour) on the same host; the
    // credential could read both. The checkout into this host's fake guest
    // fails later (no user "user" here); what matters is what the server
    // saw by then.
    try {
        ws->createSandbox("t1", request(server.base() + "/team/hostile.git", "fx"));
    } catch (const std::exception&) {
    }
    auto hostile = server.requests("/team/hostile.git");
    EXPECT_NE(std::find(hostile.begin(), hostile.end(), "AUTH"), hostile.end())
        << "the workspace's own repository is fetched with its credential";
    auto priv = server.requests("/private.git");
    EXPECT_FALSE(priv.empty()) << "the submodule was tried anonymously";
    EXPECT_EQ(std::find(priv.begin(), priv.end(), "AUTH"), priv.end())
        << "the credential reached another owner's repository through .gitmodules";
    auto notes = server.requests("/team/notes.git");
    EXPECT_NE(std::find(notes.begin(), notes.end(), "AUTH"), notes.end())
        << "without a scope the credential goes to the repositories beside the workspace's";

    // A scope replaces that: the workspace's own repository and the prefixes named.
    ws->credentials().add("t1", {"own", "https-basic", server.hostPort(), "git", server.password, "",
                             {"/team/hostile.git"}});
    auto notesBefore = server.requests("/team/notes.git").size();
    try {
        ws->createSandbox("t1", request(server.base() + "/team/hostile.git", "own"));
    } catch (const std::exception&) {
    }
    notes = server.requests("/team/notes.git");
    ASSERT_GT(notes.size(), notesBefore) << "the neighbour was tried anonymously";
    EXPECT_EQ(std::find(notes.begin() + static_cast<long>(notesBefore), notes.end(), "AUTH"),
              notes.end())
        << "a credential scoped to its repository went to the neighbour";

    // A credential scoped to the whole host may go there.
    ws->credentials().add(
        "t1", {"wide", "https-basic", server.hostPort(), "git", server.password, "", {"/"}});
    try {
        ws->createSandbox("t1", request(server.base() + "/team/hostile.git", "wide"));
    } catch (const std::exception&) {
    }
    priv = server.requests("/private.git");
    EXPECT_NE(std::find(priv.begin(), priv.end(), "AUTH"), priv.end());
    // A scoped credential is for its scope only, the workspace's repository included.
    ws->credentials().add(
        "t1", {"org", "https-basic", server.hostPort(), "git", server.password, "", {"/org/"}});
    EXPECT_EQ(codeOf([&] { ws->createSandbox("t1", request(server.base() + "/demo.git", "org")); }),
              ErrorCode::forbidden);
    auto stored = credentials.find("t1", "wide");
    ASSERT_TRUE(stored.has_value());
    EXPECT_EQ(stored->scope, std::vector<std::string>{"/"});
}

// ------------------------------------------------------------------ attack 5

// A refused password ends the fetch at the first answer (no retry loop),
// and nothing of the header libgit2 was handed outlives it (the ASan run's
// LeakSanitizer watches the connect that fails).
TEST_F(GitWorkspaces, AWrongPasswordIsRefusedAtOnce) {
    GitServer server;
    auto ws = service(loopbackOpened());
    ws->credentials().add("t1", {"bad", "https-basic", server.hostPort(), "git",
                             "wrong-" + server.password, "", {}});
    EXPECT_EQ(codeOf([&] { ws->createSandbox("t1", request(server.base() + "/demo.git", "bad")); }),
              ErrorCode::unprocessable);
    auto seen = server.requests("/demo.git");
    EXPECT_FALSE(seen.empty());
    EXPECT_LE(seen.size(), 2u) << "the refused credential was tried again and again";
}

TEST_F(GitWorkspaces, Attack5_AnEndlessPackStopsAtTheCapAndLeavesNoPartialPack) {
    GitServer server;
    auto config = loopbackOpened();
    config.maxFetchBytes = 8ull << 20;
    auto ws = service(config);
    ws->credentials().add("t1",
                      {"fx", "https-basic", server.hostPort(), "git", server.password, "", {}});
    auto started = std::chrono::steady_clock::now();
    std::string message;
    try {
        ws->createSandbox("t1", request(server.base() + "/endless/demo.git", "fx"));
        ADD_FAILURE() << "an endless pack was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::payload_too_large) << e.what();
        message = e.what();
    }
    EXPECT_NE(message.find("8 MiB"), std::string::npos) << message;
    EXPECT_NE(message.find("--git-fetch-max-mib"), std::string::npos) << message;
    EXPECT_LT(std::chrono::steady_clock::now() - started, 60s);
    // Nothing of it stays: no pack, no temporary file, no half mirror.
    std::uint64_t bytes = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir.path() + "/git"))
        if (e.is_regular_file()) {
            bytes += e.file_size();
            EXPECT_EQ(e.path().string().find("pack_git2"), std::string::npos) << e.path();
            EXPECT_NE(e.path().extension(), ".pack") << "a pack stayed: " << e.path();
        }
    EXPECT_LT(bytes, 1u << 20);
    EXPECT_TRUE(controller->list("t1").empty());

    // A mirror that existed keeps what it had and loses only the partial pack.
    test::TempDir m;
    auto repo = bareRepo(m.path() + "/m.git");
    std::ofstream(m.path() + "/m.git/objects/pack/pack_git2_abc123") << "partial";
    std::ofstream(m.path() + "/m.git/objects/pack/pack-1234.pack") << "no index";
    std::ofstream(m.path() + "/m.git/objects/pack/pack-5678.pack") << "kept";
    std::ofstream(m.path() + "/m.git/objects/pack/pack-5678.idx") << "kept";
    GitMirrors::removePartialPacks(m.path() + "/m.git");
    std::set<std::string> left;
    for (const auto& e : fs::directory_iterator(m.path() + "/m.git/objects/pack"))
        left.insert(e.path().filename().string());
    EXPECT_EQ(left, (std::set<std::string>{"pack-5678.idx", "pack-5678.pack"}));
}

TEST_F(GitWorkspaces, Attack5_TheTenantQuotaAndTheFreeDiskFloorBoundEveryFetch) {
    GitServer server;
    std::string tenantDir = dir.path() + "/git/" + sha256Hex("tenant\nt1").substr(0, 32);
    {
        auto config = loopbackOpened();
        config.tenantQuotaBytes = 4ull << 20;
        auto ws = service(config);
        ws->credentials().add("t1",
                          {"fx", "https-basic", server.hostPort(), "git", server.password, "", {}});
        // Under the quota, a fetch stops where the quota would be passed.
        try {
            ws->createSandbox("t1", request(server.base() + "/endless/demo.git", "fx"));
            ADD_FAILURE() << "an endless pack was accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::quota_exceeded) << e.what();
            EXPECT_NE(std::string(e.what()).find("--git-tenant-quota-mib"), std::string::npos)
                << e.what();
        }
        // At the quota: refused before any request goes out.
        fs::create_directories(tenantDir);
        std::ofstream(tenantDir + "/filler") << std::string(5u << 20, 'x');
        auto n = server.requests("/").size();
        EXPECT_EQ(
            codeOf([&] { ws->createSandbox("t1", request(server.base() + "/demo.git", "fx")); }),
            ErrorCode::quota_exceeded);
        EXPECT_EQ(server.requests("/").size(), n) << "a fetch went out over the quota";
        fs::remove(tenantDir + "/filler");
    }
    // Below the free-disk floor: 507 before anything is fetched.
    ControllerConfig config;
    config.dataDir = dir.path();
    config.minFreeDiskMib = 1ull << 30;  // a PiB: never free
    controller = makeController(config);
    auto ws = service(loopbackOpened());
    auto n = server.requests("/").size();
    EXPECT_EQ(codeOf([&] { ws->createSandbox("t1", request(server.base() + "/lib.git", "")); }),
              ErrorCode::insufficient_storage);
    EXPECT_EQ(server.requests("/").size(), n);
}

TEST_F(GitWorkspaces, Attack5_MirrorsNoWorkspaceUsesArePrunedAfterTheirRetention) {
    WorkspaceConfig config;
    config.mirrorRetention = std::chrono::hours(1);
    auto ws = service(config);
    std::string tenantDir = dir.path() + "/git/tenanthash";
    auto make = [&](const std::string& url, bool old) {
        std::string path = tenantDir + "/mirrors/" + sha256Hex(url).substr(0, 32) + ".git";
        fs::create_directories(path);
        bareRepo(path);
        std::ofstream(path + "/airlock-last-used") << "x\n";
        if (old)
            fs::last_write_time(path + "/airlock-last-used",
                                fs::file_time_type::clock::now() - std::chrono::hours(2));
        return path;
    };
    std::string unusedOld = make("http://h/unused.git", true);
    std::string unusedNew = make("http://h/fresh.git", false);
    std::string usedOld = make("http://h/used.git", true);
    std::string usedSub = make("http://h/sub.git", true);
    fs::create_directories(tenantDir + "/work.git/objects/info");
    std::ofstream(tenantDir + "/work.git/objects/info/alternates") << unusedOld << "/objects\n"
                                                                   << usedOld << "/objects\n";
    workspaces.put("sbx-1", "t1",
                   R"({"repo":"http://h/used.git","submodules":[{"url":"http://h/sub.git"}]})");
    EXPECT_EQ(ws->pruneMirrors(), 1u);
    EXPECT_FALSE(fs::exists(unusedOld));
    EXPECT_TRUE(fs::exists(unusedNew));
    EXPECT_TRUE(fs::exists(usedOld));
    EXPECT_TRUE(fs::exists(usedSub));
    std::ifstream alt(tenantDir + "/work.git/objects/info/alternates");
    std::string text((std::istreambuf_iterator<char>(alt)), {});
    EXPECT_EQ(text, usedOld + "/objects\n");
}

// ------------------------------------------------------------------ attack 8

// The tenant's work store reads every mirror the tenant fetched through
// alternates. A guest that claims the blob id of a file of another
// repository (one its sandbox's credential never fetched) must not get
// that blob into its tree, its diff or its commit: the claim is read back
// from the guest like any unknown one.
TEST(RecordIntegrity, Attack8_AClaimedBlobOfAnotherRepositoryIsReadBackNotTrusted) {
    initGit();
    test::TempDir dir;
    auto other = bareRepo(dir.path() + "/mirrors/other.git");
    git_oid secret;
    const std::string secretBytes = "private-Bytes-of-another-repository\n";
    ASSERT_EQ(
        git_blob_create_from_buffer(&secret, other.get(), secretBytes.data(), secretBytes.size()),
        0);
    auto work = bareRepo(dir.path() + "/work.git");
    fs::create_directories(dir.path() + "/work.git/objects/info");
    std::ofstream(dir.path() + "/work.git/objects/info/alternates")
        << dir.path() << "/mirrors/other.git/objects\n";
    work.reset();
    git_repository* raw = nullptr;
    ASSERT_EQ(git_repository_open_bare(&raw, (dir.path() + "/work.git").c_str()), 0);
    work.reset(raw);
    git_odb* rawOdb = nullptr;
    ASSERT_EQ(git_repository_odb(&rawOdb, work.get()), 0);
    Odb odb(rawOdb);
    ASSERT_TRUE(git_odb_exists(odb.get(), &secret)) << "the store reaches the other mirror";

    // The workspace's base: one file.
    git_oid readme;
    ASSERT_EQ(git_blob_create_from_buffer(&readme, work.get(), "# demo\n", 7), 0);
    Scan base;
    base.files = {{"README.md", GIT_FILEMODE_BLOB, oidHex(readme), ""}};
    git_oid baseTree =
        buildWorkingTree(work.get(), base, {}, [](const std::string&) { return std::string(); });
    std::set<std::string> own;
    for (const auto& [path, f] : flattenTree(work.get(), baseTree)) own.insert(oidHex(f.id));

    // The guest claims the other repository's blob for a new file.
    Scan now = base;
    now.files.push_back({"stolen.txt", GIT_FILEMODE_BLOB, oidHex(secret), ""});
    std::vector<std::string> read;
    git_oid tree = buildWorkingTree(
        work.get(), now, {},
        [&](const std::string& p) {
            read.push_back(p);
            return std::string("what the guest really has\n");
        },
        4ull << 30, [&](const git_oid& id) { return own.count(oidHex(id)) > 0; });
    EXPECT_EQ(read, std::vector<std::string>{"stolen.txt"})
        << "the base file is taken, the claim read";
    auto files = flattenTree(work.get(), tree);
    ASSERT_TRUE(files.count("stolen.txt"));
    EXPECT_FALSE(git_oid_equal(&files.at("stolen.txt").id, &secret));
    auto diff = diffTrees(work.get(), baseTree, tree, {});
    EXPECT_EQ(diff.patch.find("private-Bytes"), std::string::npos) << diff.patch;
    EXPECT_NE(diff.patch.find("what the guest really has"), std::string::npos);
}

}  // namespace
}  // namespace airlock::workspace

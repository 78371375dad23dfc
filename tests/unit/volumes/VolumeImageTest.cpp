// A detached volume's files, read and written on the host through
// e2fsprogs' tools: links in the image are never followed (not to the host,
// not inside the volume), every tool is bounded, killed on time and reaped.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/Error.hpp"
#include "core/SafeFs.hpp"
#include "support/TestEnv.hpp"
#include "volumes/ToolRunner.hpp"
#include "volumes/VolumeImage.hpp"

namespace airlock {
namespace volume_image_test {
namespace fs = std::filesystem;

constexpr std::uint64_t kMiB = 1024 * 1024;
const std::string kFileText = "hello volume\n";

std::string randomBytes(std::size_t size, unsigned seed) {
    std::mt19937 gen(seed);
    std::string bytes(size, '\0');
    for (auto& c : bytes) c = static_cast<char>(gen() & 0xff);
    return bytes;
}

void putFile(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
    ::chmod(path.c_str(), 0644);
}

std::string readAll(VolumeImage& volume, const std::string& path) {
    std::string out;
    volume.read(path, [&](std::string_view chunk) {
        out.append(chunk);
        return true;
    });
    return out;
}

const VolumeEntry* entryNamed(const std::vector<VolumeEntry>& entries, const std::string& name) {
    auto it = std::find_if(entries.begin(), entries.end(),
                           [&](const VolumeEntry& e) { return e.name == name; });
    return it == entries.end() ? nullptr : &*it;
}

// A temp dir with two images: `empty` from VolumeImage::format, `content`
// from mkfs.ext4 -d over a staging directory with a file, a subdirectory and
// links to host paths.
struct VolumeWorld {
    VolumeWorld() {
        empty = dir.path() + "/empty.img";
        content = dir.path() + "/content.img";
        std::string stage = dir.path() + "/stage";
        fs::create_directories(stage + "/sub");
        putFile(stage + "/file.txt", kFileText);
        putFile(stage + "/sub/inner.txt", "inner\n");
        fs::create_symlink("/etc/passwd", stage + "/evil");
        fs::create_symlink("/etc", stage + "/etcdir");
        // A link whose target prints lines that look like debugfs's own.
        fs::create_symlink("x\nInode: 12   Type: regular    Mode:  0644   Flags: 0x0",
                           stage + "/trick");
        putFile(stage + "/two\nlines", "odd name\n");
        VolumeImage::format(empty, 64 * kMiB, 0, 0);
        test::commandOutput("mkfs.ext4 -q -m 0 -d " + stage + " " + content + " 64M 2>&1");
        hostPasswd = safefs::identity("/etc/passwd");
    }
    std::string hostFile(const std::string& name, const std::string& bytes) const {
        std::string path = dir.path() + "/" + name;
        putFile(path, bytes);
        return path;
    }
    test::TempDir dir;
    std::string empty, content;
    safefs::FileIdentity hostPasswd;
};

TEST(VolumeImage, FormatMakesAnEmptySparseVolumeOwnedAsAsked) {
    VolumeWorld w;
    std::string path = w.dir.path() + "/owned.img";
    VolumeImage::format(path, 64 * kMiB, 1000, 1001);
    struct stat st {};
    ASSERT_EQ(::lstat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), 64 * kMiB);
    EXPECT_LT(VolumeImage::usedBytes(path), 32 * kMiB) << "sparse";
    EXPECT_GT(VolumeImage::usedBytes(path), 0u);

    VolumeImage volume(path);
    auto root = volume.stat("/");
    EXPECT_EQ(root.type, "dir");
    EXPECT_EQ(root.uid, 1000u);
    EXPECT_EQ(root.gid, 1001u);
    auto entries = volume.list("/");
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].name, "lost+found");
    EXPECT_EQ(test::codeOf([&] { VolumeImage::format(path, 64 * kMiB, 0, 0); }),
              ErrorCode::already_exists);
    EXPECT_EQ(test::codeOf([&] { VolumeImage::usedBytes(w.dir.path() + "/none.img"); }),
              ErrorCode::not_found);
}

TEST(VolumeImage, ListsAndStatsWhatTheImageHolds) {
    VolumeWorld w;
    VolumeImage volume(w.content);
    auto entries = volume.list("/");
    const VolumeEntry* file = entryNamed(entries, "file.txt");
    ASSERT_NE(file, nullptr);
    EXPECT_EQ(file->type, "file");
    EXPECT_EQ(file->size, kFileText.size());
    EXPECT_EQ(file->mode, 0644u);
    ASSERT_NE(entryNamed(entries, "sub"), nullptr);
    EXPECT_EQ(entryNamed(entries, "sub")->type, "dir");
    ASSERT_NE(entryNamed(entries, "evil"), nullptr);
    EXPECT_EQ(entryNamed(entries, "evil")->type, "symlink");
    EXPECT_EQ(entryNamed(entries, "etcdir")->type, "symlink");
    EXPECT_EQ(entryNamed(entries, "."), nullptr);
    EXPECT_EQ(entryNamed(entries, ".."), nullptr);
    for (const auto& e : entries)
        EXPECT_EQ(e.name.find('\n'), std::string::npos) << "a name with a line break is left out";

    auto st = volume.stat("/file.txt");
    EXPECT_EQ(st.type, "file");
    EXPECT_EQ(st.size, kFileText.size());
    EXPECT_EQ(st.mode, 0644u);
    EXPECT_EQ(volume.stat("//sub/./inner.txt").size, 6u);
    EXPECT_EQ(volume.stat("/sub").type, "dir");
    EXPECT_EQ(volume.list("/sub").size(), 1u);
    EXPECT_EQ(test::codeOf([&] { volume.stat("/nope"); }), ErrorCode::not_found);
    EXPECT_EQ(test::codeOf([&] { volume.stat("/sub/nope/deeper"); }), ErrorCode::not_found);
    EXPECT_EQ(test::codeOf([&] { volume.stat("/file.txt/below"); }), ErrorCode::not_found);
    EXPECT_EQ(test::codeOf([&] { volume.list("/file.txt"); }), ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { VolumeImage(w.dir.path() + "/none.img").stat("/"); }),
              ErrorCode::not_found);
}

TEST(VolumeImage, ReadsAFileAndNeverFollowsALink) {
    VolumeWorld w;
    VolumeImage volume(w.content);
    EXPECT_EQ(readAll(volume, "/file.txt"), kFileText);
    EXPECT_EQ(readAll(volume, "/sub/inner.txt"), "inner\n");

    bool got = false;
    auto sink = [&](std::string_view) {
        got = true;
        return true;
    };
    EXPECT_EQ(test::codeOf([&] { volume.read("/evil", sink); }), ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { volume.read("/etcdir/passwd", sink); }), ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { volume.stat("/etcdir/passwd"); }), ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { volume.stat("/evil"); }), ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { volume.list("/etcdir"); }), ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { volume.stat("/trick/file"); }), ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { volume.read("/sub", sink); }), ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { volume.read("/../etc/passwd", sink); }), ErrorCode::bad_request);
    EXPECT_FALSE(got) << "not a byte of the host's /etc/passwd";
}

TEST(VolumeImage, NormalizePathKeepsToPlainAbsolutePaths) {
    EXPECT_EQ(VolumeImage::normalizePath("/a/./b//c"), "/a/b/c");
    EXPECT_EQ(VolumeImage::normalizePath("/"), "/");
    EXPECT_EQ(VolumeImage::normalizePath("//./"), "/");
    EXPECT_EQ(VolumeImage::normalizePath("/a/b/"), "/a/b");
    EXPECT_EQ(VolumeImage::normalizePath("/with space/<2>/-x"), "/with space/<2>/-x");
    std::string longest(255, 'n');
    EXPECT_EQ(VolumeImage::normalizePath("/" + longest), "/" + longest);
    for (const std::string& bad :
         {std::string(""), std::string("a/b"), std::string("/a/../b"), std::string("/.."),
          std::string("/a/\"b"), std::string("/a\\b"), std::string("/a\nb"), std::string("/a\x7f"),
          std::string("/a\0b", 4), "/" + longest + "n", "/" + std::string(4096, 'a')}) {
        EXPECT_EQ(test::codeOf([&] { VolumeImage::normalizePath(bad); }), ErrorCode::bad_request)
            << bad;
    }
    try {
        VolumeImage::normalizePath("/a/../b");
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(".."), std::string::npos)
            << "a readable message: " << e.what();
    }
}

TEST(VolumeImage, WritesAndReadsBackTheSameBytes) {
    VolumeWorld w;
    VolumeImage volume(w.empty);
    std::string small = w.hostFile("small", "small file\n");
    std::string big = randomBytes(3 * kMiB, 7);
    std::string bigFile = w.hostFile("big", big);
    volume.write("/small.txt", small, 1000, 1000);
    volume.write("/big.bin", bigFile, 1000, 1000, 0600);
    EXPECT_EQ(readAll(volume, "/small.txt"), "small file\n");
    EXPECT_EQ(readAll(volume, "/big.bin"), big);

    // A replacement, shorter than what it replaces.
    std::string other = w.hostFile("other", "replaced\n");
    volume.write("/big.bin", other, 0, 0, 0640);
    EXPECT_EQ(readAll(volume, "/big.bin"), "replaced\n");
    auto entries = volume.list("/");
    const VolumeEntry* replaced = entryNamed(entries, "big.bin");
    ASSERT_NE(replaced, nullptr);
    EXPECT_EQ(replaced->size, 9u);
    EXPECT_EQ(replaced->mode, 0640u);
    EXPECT_EQ(replaced->uid, 0u);

    // Stopping early: the sink says so after the first chunk.
    volume.write("/big.bin", bigFile, 0, 0);
    std::size_t seen = 0;
    volume.read("/big.bin", [&](std::string_view chunk) {
        seen += chunk.size();
        return false;
    });
    EXPECT_GT(seen, 0u);
    EXPECT_LT(seen, big.size());
    std::string empty = w.hostFile("nothing", "");
    volume.write("/empty", empty, 0, 0);
    EXPECT_EQ(readAll(volume, "/empty"), "");
    EXPECT_EQ(test::codeOf([&] { volume.write("/x", w.dir.path() + "/missing", 0, 0); }),
              ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { volume.write("/x", small, 0, 0, 010644); }),
              ErrorCode::bad_request);
}

TEST(VolumeImage, WriteMakesMissingParentsWithOwnerAndMode) {
    VolumeWorld w;
    VolumeImage volume(w.empty);
    std::string host = w.hostFile("f", "deep\n");
    volume.write("/new/deep/f.txt", host, 1000, 1002, 0600);
    EXPECT_EQ(readAll(volume, "/new/deep/f.txt"), "deep\n");

    auto top = volume.list("/");
    ASSERT_NE(entryNamed(top, "new"), nullptr);
    EXPECT_EQ(entryNamed(top, "new")->type, "dir");
    EXPECT_EQ(entryNamed(top, "new")->mode, 0755u);
    EXPECT_EQ(entryNamed(top, "new")->uid, 1000u);
    EXPECT_EQ(entryNamed(top, "new")->gid, 1002u);
    auto deep = volume.list("/new");
    ASSERT_EQ(deep.size(), 1u);
    EXPECT_EQ(deep[0].name, "deep");
    EXPECT_EQ(deep[0].type, "dir");
    EXPECT_EQ(deep[0].uid, 1000u);
    auto files = volume.list("/new/deep");
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(files[0].name, "f.txt");
    EXPECT_EQ(files[0].type, "file");
    EXPECT_EQ(files[0].mode, 0600u);
    EXPECT_EQ(files[0].uid, 1000u);
    EXPECT_EQ(files[0].gid, 1002u);
    EXPECT_EQ(files[0].size, 5u);

    // An existing parent keeps its owner; the new file beside gets its own.
    volume.write("/new/g.txt", host, 2000, 2000, 0444);
    auto again = volume.list("/new");
    EXPECT_EQ(entryNamed(again, "deep")->uid, 1000u);
    EXPECT_EQ(entryNamed(again, "g.txt")->uid, 2000u);
    EXPECT_EQ(entryNamed(again, "g.txt")->mode, 0444u);
    EXPECT_EQ(test::commandOutput("e2fsck -fn " + w.empty + " >/dev/null 2>&1; echo $?"), "0\n");
}

TEST(VolumeImage, WriteRefusesDirectoriesAndLinks) {
    VolumeWorld w;
    VolumeImage volume(w.content);
    std::string host = w.hostFile("f", "no\n");
    EXPECT_EQ(test::codeOf([&] { volume.write("/sub", host, 0, 0); }), ErrorCode::conflict);
    EXPECT_EQ(test::codeOf([&] { volume.write("/evil", host, 0, 0); }), ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { volume.write("/etcdir/passwd", host, 0, 0); }),
              ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { volume.write("/etcdir/new/file", host, 0, 0); }),
              ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { volume.write("/file.txt/below", host, 0, 0); }),
              ErrorCode::conflict);
    EXPECT_EQ(test::codeOf([&] { volume.write("/", host, 0, 0); }), ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { volume.write("/a/../b", host, 0, 0); }), ErrorCode::bad_request);
    EXPECT_EQ(safefs::identity("/etc/passwd"), w.hostPasswd);
    EXPECT_EQ(readAll(volume, "/file.txt"), kFileText);
}

TEST(VolumeImage, NamesThatLookLikeDebugfsSyntaxAreJustNames) {
    VolumeWorld w;
    VolumeImage volume(w.empty);
    std::string host = w.hostFile("f", "named\n");
    // debugfs reads "<2>" as inode 2 (the root) where it takes a file spec.
    for (std::string name : {"<2>", "<11>", "-p", "with space", "#hash"}) {
        volume.write("/" + name, host, 0, 0);
        EXPECT_EQ(readAll(volume, "/" + name), "named\n") << name;
        EXPECT_EQ(volume.stat("/" + name).type, "file") << name;
        volume.remove("/" + name);
        EXPECT_EQ(test::codeOf([&] { volume.stat("/" + name); }), ErrorCode::not_found) << name;
    }
    volume.write("/<2>/inside", host, 0, 0);
    EXPECT_EQ(volume.stat("/<2>").type, "dir");
    EXPECT_EQ(volume.stat("/").type, "dir");
    EXPECT_NE(entryNamed(volume.list("/"), "lost+found"), nullptr) << "the root is untouched";
    EXPECT_EQ(volume.list("/lost+found").size(), 0u);
    EXPECT_EQ(test::commandOutput("e2fsck -fn " + w.empty + " >/dev/null 2>&1; echo $?"), "0\n");
}

TEST(VolumeImage, RemovesFilesLinksAndEmptyDirectories) {
    VolumeWorld w;
    VolumeImage volume(w.content);
    volume.remove("/file.txt");
    EXPECT_EQ(test::codeOf([&] { volume.stat("/file.txt"); }), ErrorCode::not_found);
    EXPECT_EQ(test::codeOf([&] { volume.remove("/file.txt"); }), ErrorCode::not_found);
    EXPECT_EQ(test::codeOf([&] { volume.remove("/sub"); }), ErrorCode::conflict);
    volume.remove("/sub/inner.txt");
    volume.remove("/sub");
    EXPECT_EQ(test::codeOf([&] { volume.stat("/sub"); }), ErrorCode::not_found);
    // The link goes; what it names, on the host, stays.
    EXPECT_EQ(test::codeOf([&] { volume.remove("/etcdir/passwd"); }), ErrorCode::bad_request);
    volume.remove("/evil");
    volume.remove("/etcdir");
    EXPECT_EQ(entryNamed(volume.list("/"), "evil"), nullptr);
    EXPECT_EQ(entryNamed(volume.list("/"), "etcdir"), nullptr);
    EXPECT_TRUE(fs::exists("/etc/passwd"));
    EXPECT_EQ(safefs::identity("/etc/passwd"), w.hostPasswd);
    EXPECT_EQ(test::codeOf([&] { volume.remove("/"); }), ErrorCode::bad_request);
    EXPECT_EQ(test::commandOutput("e2fsck -fn " + w.content + " >/dev/null 2>&1; echo $?"), "0\n");
}

TEST(VolumeImage, GrowKeepsTheFiles) {
    VolumeWorld w;
    VolumeImage volume(w.content);
    EXPECT_EQ(test::codeOf([&] { volume.grow(32 * kMiB); }), ErrorCode::bad_request);
    volume.grow(64 * kMiB);  // the same size: nothing to do
    volume.grow(128 * kMiB);
    EXPECT_EQ(fs::file_size(w.content), 128 * kMiB);
    std::string stats = test::commandOutput("debugfs -c -R stats " + w.content + " 2>/dev/null");
    auto number = [&](const std::string& label) {
        auto at = stats.find(label);
        return at == std::string::npos ? 0ull : std::stoull(stats.substr(at + label.size()));
    };
    EXPECT_EQ(number("Block count:") * number("Block size:"), 128 * kMiB);
    EXPECT_EQ(readAll(volume, "/file.txt"), kFileText);
    EXPECT_EQ(readAll(volume, "/sub/inner.txt"), "inner\n");
    // Room it did not have before.
    std::string big = randomBytes(80 * kMiB, 3);
    volume.write("/big", w.hostFile("big", big), 0, 0);
    EXPECT_EQ(volume.stat("/big").size, big.size());
    EXPECT_EQ(test::commandOutput("e2fsck -fn " + w.content + " >/dev/null 2>&1; echo $?"), "0\n");
}

TEST(VolumeImage, AFullVolumeSaysSoAndKeepsNoPartialFile) {
    VolumeWorld w;
    std::string path = w.dir.path() + "/small.img";
    VolumeImage::format(path, 4 * kMiB, 0, 0);
    VolumeImage volume(path);
    std::string host = w.hostFile("big", randomBytes(8 * kMiB, 5));
    EXPECT_EQ(test::codeOf([&] { volume.write("/big", host, 0, 0); }),
              ErrorCode::insufficient_storage);
    EXPECT_EQ(test::codeOf([&] { volume.stat("/big"); }), ErrorCode::not_found);
    volume.write("/small", w.hostFile("small", "fits\n"), 0, 0);
    EXPECT_EQ(readAll(volume, "/small"), "fits\n");
}

TEST(VolumeImage, RecoverJournalOnACleanImageWritesNothing) {
    VolumeWorld w;
    VolumeImage volume(w.content);
    auto before = safefs::digest(w.content);
    auto identity = safefs::identity(w.content);
    EXPECT_FALSE(volume.needsRecovery());
    volume.recoverJournal();
    EXPECT_EQ(safefs::identity(w.content), identity);
    EXPECT_EQ(safefs::digest(w.content).sha256, before.sha256);
}

TEST(VolumeImage, RecoverJournalReplaysWhatTheJournalHolds) {
    VolumeWorld w;
    // A committed transaction that rewrites file.txt's block, as a guest
    // stopped before its checkpoint leaves it.
    std::string block =
        test::commandLine("debugfs -c -R 'blocks /file.txt' " + w.content + " 2>/dev/null");
    std::string stats = test::commandOutput("debugfs -c -R stats " + w.content + " 2>/dev/null");
    auto at = stats.find("Block size:");
    ASSERT_NE(at, std::string::npos);
    std::size_t blockSize = std::stoul(stats.substr(at + 11));
    std::string data = "HELLO VOLUME\n";
    data.resize(blockSize, '\0');
    std::string blockFile = w.hostFile("block", data);
    test::commandOutput("printf 'jo\\njw -b " + std::to_string(std::stoull(block)) + " " +
                        blockFile + "\\njc\\n' | debugfs -w -f - " + w.content +
                        " >/dev/null 2>&1");

    VolumeImage volume(w.content);
    ASSERT_TRUE(volume.needsRecovery());
    EXPECT_EQ(readAll(volume, "/file.txt"), kFileText) << "reads do not replay the journal";
    volume.recoverJournal();
    EXPECT_FALSE(volume.needsRecovery());
    EXPECT_EQ(readAll(volume, "/file.txt"), "HELLO VOLUME\n");

    // A change replays it first, by itself.
    test::commandOutput(
        "printf 'jo\\njw -b " + std::to_string(std::stoull(block)) + " " +
        w.hostFile("block2", std::string("SECOND TIME!\n") + std::string(blockSize - 13, '\0')) +
        "\\njc\\n' | debugfs -w -f - " + w.content + " >/dev/null 2>&1");
    ASSERT_TRUE(volume.needsRecovery());
    volume.write("/after", w.hostFile("after", "after\n"), 0, 0);
    EXPECT_FALSE(volume.needsRecovery());
    EXPECT_EQ(readAll(volume, "/file.txt"), "SECOND TIME!\n");
}

TEST(VolumeImage, ATimeoutKillsTheToolAndReapsIt) {
    pid_t pid = -1;
    ToolCommand sleep;
    sleep.argv = {ToolRunner::locate("sleep"), "30"};
    sleep.onStart = [&](pid_t p) { pid = p; };
    auto started = std::chrono::steady_clock::now();
    EXPECT_EQ(test::codeOf([&] { ToolRunner({}, std::chrono::milliseconds(200)).run(sleep); }),
              ErrorCode::unavailable);
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
    ASSERT_GT(pid, 0);
    EXPECT_EQ(::kill(pid, 0), -1) << "killed and reaped: no zombie left";
    EXPECT_EQ(errno, ESRCH);

    // A whole volume operation under a deadline too short for it.
    VolumeWorld w;
    VolumeImage hurried(w.content, {}, std::chrono::milliseconds(1));
    bool timedOut = false;  // a fast machine may finish one in time, never five
    for (int attempt = 0; attempt < 5 && !timedOut; ++attempt) {
        try {
            readAll(hurried, "/file.txt");
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::unavailable);
            timedOut = true;
        }
    }
    EXPECT_TRUE(timedOut);
}

TEST(VolumeImage, NoDescriptorOutlivesAnOperation) {
    VolumeWorld w;
    auto openFds = [] {
        return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator{});
    };
    auto before = openFds();
    VolumeImage volume(w.content);
    VolumeImage hurried(w.content, {}, std::chrono::milliseconds(1));
    std::string host = w.hostFile("f", randomBytes(kMiB, 9));
    for (int round = 0; round < 3; ++round) {
        volume.list("/");
        volume.write("/f", host, 0, 0);
        volume.read("/f", [](std::string_view) { return false; });
        EXPECT_EQ(test::codeOf([&] { volume.stat("/nope"); }), ErrorCode::not_found);
        EXPECT_EQ(test::codeOf([&] {
                      volume.read("/etcdir/passwd", [](std::string_view) { return true; });
                  }),
                  ErrorCode::bad_request);
        // A tool killed at its deadline: a volume operation (which a fast
        // machine may finish in time) and one that never could.
        try {
            hurried.list("/");
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::unavailable);
        }
        ToolCommand sleep;
        sleep.argv = {ToolRunner::locate("sleep"), "30"};
        EXPECT_EQ(
            test::codeOf([&] { ToolRunner({}, std::chrono::milliseconds(50)).run(sleep); }),
            ErrorCode::unavailable);
        EXPECT_EQ(test::codeOf([&] {
                      volume.read("/f", [](std::string_view) -> bool {
                          throw Error(ErrorCode::conflict, "sink");
                      });
                  }),
                  ErrorCode::conflict);
        volume.remove("/f");
    }
    EXPECT_EQ(openFds(), before);
}

TEST(VolumeImage, ToolsGetOnlyTheirDescriptorsAndAFixedEnvironment) {
    test::TempDir dir;
    UniqueFd stray(
        ::open("/dev/null", O_RDONLY));  // no O_CLOEXEC: it would leak through a bare exec
    UniqueFd passed(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    ToolCommand listing;
    listing.argv = {ToolRunner::locate("ls"), "/proc/self/fd"};
    listing.fds = {passed.get()};
    ToolResult r = ToolRunner().run(listing);
    EXPECT_EQ(r.exitCode, 0);
    // ls's own directory descriptor comes after 0-3.
    EXPECT_EQ(r.output, "0\n1\n2\n3\n4\n");

    ToolCommand env;
    env.argv = {ToolRunner::locate("env")};
    ToolResult e = ToolRunner().run(env);
    EXPECT_NE(e.output.find("LC_ALL=C\n"), std::string::npos);
    EXPECT_EQ(e.output.find("HOME="), std::string::npos);

    ToolCommand cwd;
    cwd.argv = {ToolRunner::locate("pwd")};
    EXPECT_EQ(ToolRunner().run(cwd).output, "/\n");

    // stdin carries the input; a tool that stops reading costs no SIGPIPE.
    ToolCommand cat;
    cat.argv = {ToolRunner::locate("cat")};
    cat.input = "through stdin\n";
    EXPECT_EQ(ToolRunner().run(cat).output, "through stdin\n");
    ToolCommand deaf;
    deaf.argv = {ToolRunner::locate("true")};
    deaf.input = std::string(4 * kMiB, 'x');
    EXPECT_EQ(ToolRunner().run(deaf).exitCode, 0);

    ToolCommand missing;
    missing.argv = {dir.path() + "/no-such-tool"};
    EXPECT_EQ(test::codeOf([&] { ToolRunner().run(missing); }), ErrorCode::internal);
}

TEST(VolumeImage, ToolOutputAndFilesAreBounded) {
    test::TempDir dir;
    ToolCommand yes;
    yes.argv = {ToolRunner::locate("yes")};
    yes.maxOutputBytes = kMiB;
    auto started = std::chrono::steady_clock::now();
    ToolResult r = ToolRunner().run(yes);
    EXPECT_TRUE(r.stopped);
    EXPECT_LE(r.output.size(), kMiB);
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));

    std::string out = dir.path() + "/written";
    ToolCommand dd;
    dd.argv = {ToolRunner::locate("dd"), "if=/dev/zero", "of=" + out, "bs=64K", "count=64"};
    dd.maxFileBytes = kMiB / 4;
    ToolResult d = ToolRunner().run(dd);
    EXPECT_TRUE(d.signal == SIGXFSZ || d.exitCode != 0);
    EXPECT_LE(fs::file_size(out), kMiB / 4);
}

// A hijacked tool's leftovers: what it starts in the background dies with
// it, and it cannot signal a process of the same uid outside (a QEMU another
// airlockd runs under that uid).
TEST(VolumeImage, WhatADroppedToolStartsEndsWithIt) {
    if (::geteuid() != 0) GTEST_SKIP() << "dropping to another uid needs root";
    // The background sleep keeps the tool's stdout open: the run ends before
    // its deadline only if the sleep dies with the tool.
    ToolCommand spawn;
    spawn.argv = {ToolRunner::locate("sh"), "-c", "sleep 30 & echo $$"};
    ToolResult r = ToolRunner({65534, 65534, true}, std::chrono::seconds(10)).run(spawn);
    EXPECT_EQ(r.output, "1\n") << "the tool is pid 1 of a namespace of its own";

    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t neighbour = ::fork();
    ASSERT_GE(neighbour, 0);
    if (neighbour == 0) {
        if (::setresgid(65534, 65534, 65534) == 0 && ::setresuid(65534, 65534, 65534) == 0 &&
            ::write(ready[1], "u", 1) == 1)
            ::pause();
        ::_exit(1);
    }
    ::close(ready[1]);
    char dropped = 0;
    ASSERT_EQ(::read(ready[0], &dropped, 1), 1) << "the neighbour runs as nobody";
    ::close(ready[0]);
    ToolCommand signal;
    signal.argv = {ToolRunner::locate("sh"), "-c",
                   "kill -TERM " + std::to_string(neighbour) + " 2>/dev/null; echo done"};
    EXPECT_EQ(ToolRunner({65534, 65534, true}).run(signal).output, "done\n");
    int status = 0;
    EXPECT_EQ(::waitpid(neighbour, &status, WNOHANG), 0) << "the tool signalled a host process";
    ::kill(neighbour, SIGKILL);
    ::waitpid(neighbour, &status, 0);
}

TEST(VolumeImage, ToolsRunAsTheToolUser) {
    if (::geteuid() != 0) GTEST_SKIP() << "dropping to another uid needs root";
    VolumeWorld w;
    ToolRunner asNobody({65534, 65534, true});
    for (std::string flag : {"-u", "-g", "-G"}) {
        ToolCommand id;
        id.argv = {ToolRunner::locate("id"), flag};
        EXPECT_EQ(asNobody.run(id).output, "65534\n")
            << "id " << flag << ": no supplementary group left";
    }

    ASSERT_EQ(::chown(w.content.c_str(), 65534, 65534), 0);
    ASSERT_EQ(::chmod(w.content.c_str(), 0600), 0);
    VolumeImage nobody(w.content, {65534, 65534, true});
    EXPECT_EQ(readAll(nobody, "/file.txt"), kFileText);
    EXPECT_NE(entryNamed(nobody.list("/"), "sub"), nullptr);
    std::string host = w.hostFile("f", "as nobody\n");
    nobody.write("/sub/new.txt", host, 1000, 1000);
    EXPECT_EQ(readAll(nobody, "/sub/new.txt"), "as nobody\n");
    nobody.remove("/sub/new.txt");
    nobody.grow(96 * kMiB);
    EXPECT_EQ(readAll(nobody, "/file.txt"), kFileText);
    EXPECT_EQ(test::codeOf([&] { nobody.read("/evil", [](std::string_view) { return true; }); }),
              ErrorCode::bad_request);

    // Another uid cannot open the image: the tools really run as the one given.
    VolumeImage stranger(w.content, {65533, 65533, true});
    EXPECT_EQ(test::codeOf([&] { stranger.stat("/file.txt"); }), ErrorCode::internal);
    // Nor read a host file it may not.
    ::chmod(host.c_str(), 0600);
    EXPECT_EQ(test::codeOf([&] { nobody.write("/sub/secret", host, 0, 0); }), ErrorCode::internal);
    EXPECT_EQ(test::codeOf([&] { nobody.stat("/sub/secret"); }), ErrorCode::not_found);
}

}  // namespace volume_image_test
}  // namespace airlock

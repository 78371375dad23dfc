// The build-context index every COPY step reads through: what it lets in is
// what lands in a template, and its digest is what the layer cache trusts.
// Archives come from GNU tar itself, and hostile ones are made by hand.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/Error.hpp"
#include "core/Sha256.hpp"
#include "support/TestEnv.hpp"
#include "templates/BuildContext.hpp"

namespace airlock::templates {
namespace {

namespace fs = std::filesystem;
using test::codeOf;

void writeFile(const std::string& path, const std::string& data, mode_t mode = 0644) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
    ::chmod(path.c_str(), mode);
}

std::string readFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void mkdir(const std::string& path, mode_t mode = 0755) {
    fs::create_directories(path);
    ::chmod(path.c_str(), mode);
}

void sh(const std::string& command) { ASSERT_EQ(std::system(command.c_str()), 0) << command; }

std::string message(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    ADD_FAILURE() << "no error thrown";
    return "";
}

const std::string kLongDir = "deep/" + std::string(60, 'd') + "/" + std::string(60, 'e');
const std::string kLongPath = kLongDir + "/file.txt";  // 135 bytes

// A context tree: a directory with files, a subdirectory and a symlink, a
// file outside it, a path over 100 bytes and an empty directory.
void makeTree(const std::string& root) {
    mkdir(root + "/app");
    writeFile(root + "/app/x.txt", "hello x");
    writeFile(root + "/app/run.sh", "#!/bin/sh\necho run\n", 0755);
    mkdir(root + "/app/sub", 0700);
    writeFile(root + "/app/sub/y.txt", "why");
    ::symlink("x.txt", (root + "/app/link").c_str());
    writeFile(root + "/other.txt", "other");
    writeFile(root + "/notes.md", "notes");
    mkdir(root + "/" + kLongDir);
    writeFile(root + "/" + kLongPath, "deep file");
    mkdir(root + "/empty");
}

std::string makeTar(const std::string& dir, const std::string& root,
                    const std::string& format = "gnu") {
    std::string tar = dir + "/ctx-" + format + ".tar";
    std::system(("rm -f '" + tar + "'").c_str());
    sh("tar --format=" + format + " -cf '" + tar + "' -C '" + root + "' .");
    return tar;
}

const ContextEntry* find(const std::vector<ContextEntry>& entries, const std::string& path) {
    for (const auto& e : entries)
        if (e.path == path) return &e;
    return nullptr;
}

std::set<std::string> paths(const std::vector<ContextEntry>& entries) {
    std::set<std::string> out;
    for (const auto& e : entries) out.insert(e.path);
    return out;
}

// What a directory holds: "path" -> "f:<content>", "d", "l:<target>".
std::map<std::string, std::string> tree(const std::string& root) {
    std::map<std::string, std::string> out;
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
         ++it) {
        std::string rel = it->path().lexically_relative(root).string();
        if (it->is_symlink())
            out[rel] = "l:" + fs::read_symlink(it->path()).string();
        else if (it->is_directory())
            out[rel] = "d";
        else
            out[rel] = "f:" + readFile(it->path().string());
    }
    return out;
}

mode_t modeOf(const std::string& path) {
    struct stat st {};
    ::lstat(path.c_str(), &st);
    return st.st_mode & 07777;
}

// ---- hand-made archives -------------------------------------------------

struct Hdr {
    std::string name{};
    char type = '0';
    std::string data{};
    std::string link{};
    std::string prefix{};
    std::string magic = std::string(
        "ustar\0"
        "00",
        8);
    bool base256Size = false;
    bool badChecksum = false;
    std::uint32_t mode = 0644;
    std::string rawSize{};  // the size field's bytes, when not the data's size
};

void octal(std::string& b, std::size_t at, std::size_t len, std::uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%0*llo", static_cast<int>(len - 1),
                  static_cast<unsigned long long>(v));
    b.replace(at, len - 1, buf, len - 1);
}

std::string header(const Hdr& h) {
    std::string b(512, '\0');
    b.replace(0, std::min<std::size_t>(100, h.name.size()), h.name.substr(0, 100));
    octal(b, 100, 8, h.mode);
    octal(b, 108, 8, 0);
    octal(b, 116, 8, 0);
    if (h.base256Size) {
        b[124] = static_cast<char>(0x80);
        std::uint64_t size = h.data.size();
        for (int i = 11; i >= 1; --i, size >>= 8) b[124 + i] = static_cast<char>(size & 0xff);
    } else {
        octal(b, 124, 12, h.data.size());
    }
    if (!h.rawSize.empty()) b.replace(124, h.rawSize.size(), h.rawSize);
    octal(b, 136, 12, 1700000000);
    b[156] = h.type;
    b.replace(157, std::min<std::size_t>(100, h.link.size()), h.link.substr(0, 100));
    b.replace(257, 8, h.magic);
    b.replace(345, h.prefix.size(), h.prefix);
    b.replace(148, 8, "        ");
    unsigned sum = 0;
    for (unsigned char c : b) sum += c;
    if (h.badChecksum) ++sum;
    char buf[8];
    std::snprintf(buf, sizeof buf, "%06o", sum);
    b.replace(148, 7, buf, 7);  // six digits and a NUL, then the space
    return b;
}

std::string entry(const Hdr& h) {
    return header(h) + h.data + std::string((512 - h.data.size() % 512) % 512, '\0');
}

std::string paxRecord(const std::string& key, const std::string& value) {
    std::string body = " " + key + "=" + value + "\n";
    std::size_t len = body.size() + 1;
    while (std::to_string(len).size() + body.size() != len) ++len;
    return std::to_string(len) + body;
}

const std::string kEnd(1024, '\0');

std::string writeTar(const std::string& dir, const std::string& bytes,
                     const std::string& name = "h.tar") {
    std::string path = dir + "/" + name;
    writeFile(path, bytes);
    return path;
}

// ---- indexing -----------------------------------------------------------

TEST(BuildContext, IndexesWhatGnuTarWritesInEveryFormat) {
    test::TempDir dir;
    std::string root = dir.path() + "/ctx";
    makeTree(root);
    for (std::string format : {"gnu", "posix", "ustar", "oldgnu"}) {
        SCOPED_TRACE(format);
        std::string tarPath = makeTar(dir.path(), root, format);
        auto ctx = BuildContext::open(tarPath);
        const auto& entries = ctx.entries();
        EXPECT_EQ(
            paths(entries),
            (std::set<std::string>{"app", "app/x.txt", "app/run.sh", "app/sub", "app/sub/y.txt",
                                   "app/link", "other.txt", "notes.md", "deep",
                                   "deep/" + std::string(60, 'd'), kLongDir, kLongPath, "empty"}));
        std::string tarBytes = readFile(tarPath);
        for (const auto& e : entries) {
            EXPECT_FALSE(e.path.starts_with("./") || e.path.ends_with("/")) << e.path;
            if (e.type == '0') {
                EXPECT_EQ(e.sha256, sha256Hex(tarBytes.substr(e.dataOffset, e.size))) << e.path;
            }
        }
        const ContextEntry* app = find(entries, "app");
        ASSERT_TRUE(app);
        EXPECT_EQ(app->type, '5');
        EXPECT_EQ(app->mode, 0755u);
        EXPECT_EQ(app->size, 0u);
        EXPECT_EQ(find(entries, "app/sub")->mode, 0700u);
        const ContextEntry* x = find(entries, "app/x.txt");
        ASSERT_TRUE(x);
        EXPECT_EQ(x->type, '0');
        EXPECT_EQ(x->mode, 0644u);
        EXPECT_EQ(x->size, 7u);
        EXPECT_EQ(x->sha256, sha256Hex("hello x"));
        EXPECT_EQ(tarBytes.substr(x->dataOffset, x->size), "hello x");
        EXPECT_GT(x->mtime, 1600000000);
        EXPECT_EQ(find(entries, "app/run.sh")->mode, 0755u);
        const ContextEntry* link = find(entries, "app/link");
        ASSERT_TRUE(link);
        EXPECT_EQ(link->type, '2');
        EXPECT_EQ(link->linkTarget, "x.txt");
        EXPECT_EQ(link->sha256, "");
        const ContextEntry* deep = find(entries, kLongPath);
        ASSERT_TRUE(deep);
        EXPECT_EQ(deep->sha256, sha256Hex("deep file"));
        EXPECT_EQ(tarBytes.substr(deep->dataOffset, deep->size), "deep file");
    }
}

TEST(BuildContext, ReadsPaxGnuLongNamesAndBase256ByHand) {
    test::TempDir dir;
    std::string longName = std::string(150, 'n') + "/file";
    std::string longLink = "/" + std::string(150, 't');
    std::string bytes =
        entry({.name = "./PaxHeaders/x",
               .type = 'x',
               .data = paxRecord("path", "pax/renamed.txt") + paxRecord("mtime", "1700000001.5") +
                       paxRecord("atime", "1")}) +
        entry({.name = "truncated-name", .data = "pax data"}) +
        entry({.name = "././@LongLink", .type = 'L', .data = longName + std::string(1, '\0')}) +
        entry({.name = longName.substr(0, 100), .data = "gnu long"}) +
        entry({.name = "././@LongLink", .type = 'K', .data = longLink + std::string(1, '\0')}) +
        entry({.name = "sym", .type = '2', .link = longLink.substr(0, 100)}) +
        entry({.name = "big", .data = "base 256", .base256Size = true}) +
        entry({.name = "name.txt", .data = "prefixed", .prefix = "the/prefix"}) +
        entry({.name = "v7dir/", .type = '\0', .magic = std::string(8, '\0')}) +
        entry({.name = "./g", .type = 'g', .data = paxRecord("path", "ignored")}) +
        entry({.name = "gnu-prefix-ignored",
               .data = "x",
               .prefix = "not-a-prefix",
               .magic = std::string("ustar  \0", 8)}) +
        kEnd;
    auto ctx = BuildContext::open(writeTar(dir.path(), bytes));
    const auto& entries = ctx.entries();
    ASSERT_EQ(entries.size(), 7u);
    EXPECT_EQ(entries[0].path, "pax/renamed.txt");
    EXPECT_EQ(entries[0].sha256, sha256Hex("pax data"));
    EXPECT_EQ(entries[0].mtime, 1700000001);
    EXPECT_EQ(entries[1].path, longName);
    EXPECT_EQ(entries[1].sha256, sha256Hex("gnu long"));
    EXPECT_EQ(entries[2].path, "sym");
    EXPECT_EQ(entries[2].linkTarget, longLink);
    EXPECT_EQ(entries[3].path, "big");
    EXPECT_EQ(entries[3].size, 8u);
    EXPECT_EQ(entries[3].sha256, sha256Hex("base 256"));
    EXPECT_EQ(entries[4].path, "the/prefix/name.txt");
    EXPECT_EQ(entries[5].path, "v7dir");
    EXPECT_EQ(entries[5].type, '5');
    EXPECT_EQ(entries[6].path, "gnu-prefix-ignored");
}

TEST(BuildContext, ALaterEntryOfOneNameReplacesTheEarlier) {
    test::TempDir dir;
    std::string bytes = entry({.name = "a.txt", .data = "first"}) +
                        entry({.name = "b.txt", .data = "b"}) +
                        entry({.name = "./a.txt", .data = "second"}) + kEnd;
    auto ctx = BuildContext::open(writeTar(dir.path(), bytes));
    ASSERT_EQ(ctx.entries().size(), 2u);
    EXPECT_EQ(ctx.entries()[0].path, "a.txt");
    EXPECT_EQ(ctx.entries()[0].sha256, sha256Hex("second"));
}

TEST(BuildContext, EndsAtTwoZeroBlocksOrEofAfterOne) {
    test::TempDir dir;
    std::string one = entry({.name = "a", .data = "a"});
    EXPECT_EQ(
        BuildContext::open(writeTar(dir.path(), one + kEnd + "trailing junk")).entries().size(),
        1u);
    EXPECT_EQ(
        BuildContext::open(writeTar(dir.path(), one + std::string(512, '\0'))).entries().size(),
        1u);
    EXPECT_NE(
        message([&] { BuildContext::open(writeTar(dir.path(), one)); }).find("end-of-archive"),
        std::string::npos);
    EXPECT_NE(
        message([&] {
            BuildContext::open(writeTar(dir.path(), one + std::string(512, '\0') + one + kEnd));
        }).find("lone zero block"),
        std::string::npos);
    EXPECT_TRUE(BuildContext::open(writeTar(dir.path(), kEnd)).entries().empty());
}

TEST(BuildContext, RejectsAbsolutePathsAndDotDot) {
    test::TempDir dir;
    auto rejected = [&](const std::string& bytes) {
        std::string m;
        EXPECT_EQ(codeOf([&] {
                      try {
                          BuildContext::open(writeTar(dir.path(), bytes));
                      } catch (const Error& e) {
                          m = e.what();
                          throw;
                      }
                  }),
                  ErrorCode::bad_request);
        return m;
    };
    EXPECT_NE(rejected(entry({.name = "/etc/passwd", .data = "x"}) + kEnd)
                  .find("absolute path '/etc/passwd'"),
              std::string::npos);
    EXPECT_NE(rejected(entry({.name = "../escape", .data = "x"}) + kEnd).find("'..'"),
              std::string::npos);
    EXPECT_NE(rejected(entry({.name = "a/../../b", .data = "x"}) + kEnd).find("'..'"),
              std::string::npos);
    EXPECT_NE(rejected(entry({.name = "a/b/..", .type = '5'}) + kEnd).find("'..'"),
              std::string::npos);
    EXPECT_NE(rejected(entry({.name = "x", .data = "x", .prefix = "/abs"}) + kEnd).find("absolute"),
              std::string::npos);
    // Through a pax path or a GNU long name, just the same.
    EXPECT_NE(
        rejected(
            entry({.name = "p", .type = 'x', .data = paxRecord("path", "../../etc/cron.d/x")}) +
            entry({.name = "innocent", .data = "x"}) + kEnd)
            .find("'..'"),
        std::string::npos);
    EXPECT_NE(
        rejected(
            entry({.name = "././@LongLink", .type = 'L', .data = "/root/.ssh/authorized_keys"}) +
            entry({.name = "innocent", .data = "x"}) + kEnd)
            .find("absolute"),
        std::string::npos);
}

TEST(BuildContext, RejectsEntriesUnderASymlinkOrFile) {
    test::TempDir dir;
    std::string m = message([&] {
        BuildContext::open(writeTar(dir.path(), entry({.name = "a", .type = '2', .link = "/etc"}) +
                                                    entry({.name = "a/passwd", .data = "x"}) +
                                                    kEnd));
    });
    EXPECT_NE(m.find("under 'a', which is a symlink"), std::string::npos) << m;
    m = message([&] {
        BuildContext::open(writeTar(dir.path(), entry({.name = "f/x", .data = "x"}) +
                                                    entry({.name = "f", .data = "file"}) + kEnd));
    });
    EXPECT_NE(m.find("which is a file"), std::string::npos) << m;
}

TEST(BuildContext, RejectsHardlinksDevicesAndFifos) {
    test::TempDir dir;
    std::string root = dir.path() + "/ctx";
    writeFile(root + "/a.txt", "a");
    ASSERT_EQ(::link((root + "/a.txt").c_str(), (root + "/hard.txt").c_str()), 0);
    std::string m = message([&] { BuildContext::open(makeTar(dir.path(), root)); });
    EXPECT_NE(m.find("hardlink"), std::string::npos) << m;
    fs::remove(root + "/hard.txt");
    ASSERT_EQ(::mkfifo((root + "/fifo").c_str(), 0644), 0);
    m = message([&] { BuildContext::open(makeTar(dir.path(), root)); });
    EXPECT_NE(m.find("FIFO"), std::string::npos) << m;
    EXPECT_NE(
        message([&] {
            BuildContext::open(writeTar(dir.path(), entry({.name = "null", .type = '3'}) + kEnd));
        }).find("character device"),
        std::string::npos);
    EXPECT_NE(
        message([&] {
            BuildContext::open(writeTar(dir.path(), entry({.name = "sda", .type = '4'}) + kEnd));
        }).find("block device"),
        std::string::npos);
    EXPECT_NE(
        message([&] {
            BuildContext::open(writeTar(dir.path(), entry({.name = "s", .type = 'S'}) + kEnd));
        }).find("sparse"),
        std::string::npos);
}

TEST(BuildContext, RejectsMalformedArchives) {
    test::TempDir dir;
    auto m = [&](const std::string& bytes) {
        std::string text = message([&] { BuildContext::open(writeTar(dir.path(), bytes)); });
        EXPECT_NE(text.find("not a valid tar"), std::string::npos) << text;
        return text;
    };
    std::string good = entry({.name = "a.txt", .data = std::string(1000, 'a')}) + kEnd;
    EXPECT_NE(m("").find("empty"), std::string::npos);
    EXPECT_NE(m(entry({.name = "a", .data = "x", .badChecksum = true}) + kEnd).find("checksum"),
              std::string::npos);
    EXPECT_NE(m(std::string(600, 'z')).find("checksum"), std::string::npos);
    EXPECT_NE(m(good.substr(0, 300)).find("inside a header"), std::string::npos);
    EXPECT_NE(m(good.substr(0, 512 + 700)).find("inside the data"), std::string::npos);
    // A size field that is not octal.
    EXPECT_NE(m(header({.name = "a", .data = "x", .rawSize = "9z9"}) + std::string(512, 'x') + kEnd)
                  .find("not a number"),
              std::string::npos);
    // Data on a directory or symlink: readers disagree on it, so it is refused.
    EXPECT_NE(m(entry({.name = "d", .type = '5', .data = "hidden"}) + kEnd).find("has data"),
              std::string::npos);
    EXPECT_NE(m(entry({.name = "p", .type = 'x', .data = paxRecord("path", "a")}) + kEnd)
                  .find("no entry after"),
              std::string::npos);
    EXPECT_NE(
        m(entry({.name = "p", .type = 'x', .data = "99 path=a\n"}) + entry({.name = "a"}) + kEnd)
            .find("length"),
        std::string::npos);
    EXPECT_NE(m(entry({.name = "s", .type = '2'}) + kEnd).find("no usable target"),
              std::string::npos);
}

TEST(BuildContext, RefusesCompressedContexts) {
    test::TempDir dir;
    std::string root = dir.path() + "/ctx";
    writeFile(root + "/a.txt", "a");
    sh("tar -czf '" + dir.path() + "/c.tgz' -C '" + root + "' .");
    std::string m = message([&] { BuildContext::open(dir.path() + "/c.tgz"); });
    EXPECT_NE(m.find("gzip contexts are not supported"), std::string::npos) << m;
    EXPECT_EQ(codeOf([&] { BuildContext::open(dir.path() + "/c.tgz"); }), ErrorCode::bad_request);
    // A plain tar whose first name happens to start like bzip2's magic.
    EXPECT_EQ(
        BuildContext::open(writeTar(dir.path(), entry({.name = "BZh91AY", .data = "x"}) + kEnd))
            .entries()
            .size(),
        1u);
}

TEST(BuildContext, BoundsEntriesAndBytes) {
    test::TempDir dir;
    std::string bytes;
    for (int i = 0; i < 5; ++i)
        bytes += entry({.name = "f" + std::to_string(i), .data = std::string(100, 'x')});
    std::string path = writeTar(dir.path(), bytes + kEnd);
    EXPECT_EQ(BuildContext::open(path, 5, 500).entries().size(), 5u);
    EXPECT_NE(message([&] { BuildContext::open(path, 4, 500); }).find("more than 4 entries"),
              std::string::npos);
    EXPECT_NE(message([&] { BuildContext::open(path, 5, 499); }).find("more than 499 bytes"),
              std::string::npos);
    EXPECT_EQ(codeOf([&] { BuildContext::open(path, 4); }), ErrorCode::bad_request);
}

// ---- select and digestOf ------------------------------------------------

TEST(BuildContext, SelectsWhatDockerCopyWould) {
    test::TempDir dir;
    std::string root = dir.path() + "/ctx";
    makeTree(root);
    auto ctx = BuildContext::open(makeTar(dir.path(), root));
    std::set<std::string> app = {"app",     "app/x.txt",     "app/run.sh",
                                 "app/sub", "app/sub/y.txt", "app/link"};
    EXPECT_EQ(paths(ctx.select("app")), app);
    EXPECT_EQ(paths(ctx.select("app/")), app);
    EXPECT_EQ(paths(ctx.select("./app/")), app);
    EXPECT_EQ(paths(ctx.select("/app")), app);
    EXPECT_EQ(paths(ctx.select("app/.")), app);
    EXPECT_EQ(paths(ctx.select("app/x.txt")), std::set<std::string>{"app/x.txt"});
    EXPECT_EQ(paths(ctx.select("app/sub/../x.txt")), std::set<std::string>{"app/x.txt"});
    EXPECT_EQ(paths(ctx.select("app/link")), std::set<std::string>{"app/link"});
    EXPECT_EQ(paths(ctx.select("empty")), std::set<std::string>{"empty"});
    for (const char* all : {"", ".", "./", "/"})
        EXPECT_EQ(ctx.select(all).size(), ctx.entries().size()) << all;
    // A directory only implied by the paths under it.
    EXPECT_EQ(paths(ctx.select("deep/" + std::string(60, 'd') + "/" + std::string(60, 'e'))),
              (std::set<std::string>{kLongDir, kLongPath}));

    EXPECT_EQ(codeOf([&] { ctx.select("missing"); }), ErrorCode::unprocessable);
    EXPECT_EQ(message([&] { ctx.select("missing.txt"); }),
              "copy source 'missing.txt' is not in the build context");
    EXPECT_EQ(codeOf([&] { ctx.select("app/x.txt/"); }), ErrorCode::unprocessable);
    EXPECT_NE(message([&] { ctx.select("app/x.txt/"); }).find("not a directory"),
              std::string::npos);
    EXPECT_EQ(codeOf([&] { ctx.select("ap"); }), ErrorCode::unprocessable);  // no prefix matches
    EXPECT_EQ(codeOf([&] { ctx.select("../ctx"); }), ErrorCode::bad_request);
    EXPECT_EQ(codeOf([&] { ctx.select("app/../../x"); }), ErrorCode::bad_request);
}

TEST(BuildContext, GlobsMatchLikeFilepathMatch) {
    test::TempDir dir;
    std::string root = dir.path() + "/ctx";
    makeTree(root);
    auto ctx = BuildContext::open(makeTar(dir.path(), root));
    EXPECT_EQ(paths(ctx.select("*.txt")), std::set<std::string>{"other.txt"});
    EXPECT_EQ(paths(ctx.select("*.[mt][dx]*")), (std::set<std::string>{"other.txt", "notes.md"}));
    EXPECT_EQ(paths(ctx.select("app/*.txt")), std::set<std::string>{"app/x.txt"});
    EXPECT_EQ(paths(ctx.select("app/?.txt")), std::set<std::string>{"app/x.txt"});
    EXPECT_EQ(paths(ctx.select("app/[^x]*")),
              (std::set<std::string>{"app/run.sh", "app/sub", "app/sub/y.txt", "app/link"}));
    EXPECT_EQ(paths(ctx.select("a?p/s*/*")), std::set<std::string>{"app/sub/y.txt"});
    EXPECT_EQ(codeOf([&] { ctx.select("*/y.txt"); }), ErrorCode::unprocessable);  // 2 levels down
}

TEST(BuildContext, GlobEdgeCases) {
    test::TempDir dir;
    std::string bytes = entry({.name = "a*b", .data = "1"}) + entry({.name = "axxb", .data = "2"}) +
                        entry({.name = "caf\xc3\xa9", .data = "3"}) +
                        entry({.name = "-x", .data = "4"}) + kEnd;
    auto ctx = BuildContext::open(writeTar(dir.path(), bytes));
    // '\' escapes in a pattern; a source with no pattern is taken as it
    // is, backslash and all (Docker's containsWildcards).
    EXPECT_EQ(paths(ctx.select("a\\*?")), std::set<std::string>{"a*b"});
    EXPECT_EQ(codeOf([&] { ctx.select("a\\*b"); }), ErrorCode::unprocessable);
    EXPECT_EQ(paths(ctx.select("a*b")), (std::set<std::string>{"a*b", "axxb"}));
    EXPECT_EQ(paths(ctx.select("caf?")),
              std::set<std::string>{"caf\xc3\xa9"});  // one character, two bytes
    EXPECT_EQ(paths(ctx.select("caf[\xc3\xa0-\xc3\xbf]")), std::set<std::string>{"caf\xc3\xa9"});
    EXPECT_EQ(paths(ctx.select("[\\-]x")), std::set<std::string>{"-x"});
    EXPECT_EQ(codeOf([&] { ctx.select("*a*a*a*a*a*a*a*a*a*b"); }), ErrorCode::unprocessable);
    for (const char* bad : {"[", "[]a]", "[a-]", "[^", "*x\\", "[-a]"})
        EXPECT_EQ(codeOf([&] { ctx.select(bad); }), ErrorCode::bad_request) << bad;
}

TEST(BuildContext, DigestFollowsTheSelectionAndNothingElse) {
    test::TempDir dir;
    std::string root = dir.path() + "/ctx";
    makeTree(root);
    auto before = BuildContext::open(makeTar(dir.path(), root));
    std::string app = before.digestOf("app");
    std::string x = before.digestOf("app/x.txt");
    std::string all = before.digestOf(".");
    EXPECT_EQ(app.size(), 64u);
    EXPECT_EQ(before.digestOf("app/"), app);
    EXPECT_EQ(before.digestOf("/app"), app);
    EXPECT_NE(app, x);
    EXPECT_NE(app, all);

    // A file outside the selection changes: the selection's digest holds.
    writeFile(root + "/other.txt", "changed");
    auto outside = BuildContext::open(makeTar(dir.path(), root));
    EXPECT_EQ(outside.digestOf("app"), app);
    EXPECT_EQ(outside.digestOf("app/x.txt"), x);
    EXPECT_NE(outside.digestOf("."), all);

    // A file inside it changes: the digest does too.
    writeFile(root + "/app/sub/y.txt", "changed");
    auto inside = BuildContext::open(makeTar(dir.path(), root));
    EXPECT_NE(inside.digestOf("app"), app);
    EXPECT_EQ(inside.digestOf("app/x.txt"), x);

    // So does a mode, a symlink's target, a new file.
    ::chmod((root + "/app/x.txt").c_str(), 0600);
    auto mode = BuildContext::open(makeTar(dir.path(), root));
    EXPECT_NE(mode.digestOf("app/x.txt"), x);
    fs::remove(root + "/app/link");
    ::symlink("run.sh", (root + "/app/link").c_str());
    std::string beforeLink = mode.digestOf("app");
    EXPECT_NE(BuildContext::open(makeTar(dir.path(), root)).digestOf("app"), beforeLink);
    writeFile(root + "/app/new.txt", "");
    EXPECT_NE(BuildContext::open(makeTar(dir.path(), root)).digestOf("app/"),
              BuildContext::open(makeTar(dir.path(), root)).digestOf("app/x.txt"));

    // The digest keys what lands: a file copied alone lands under its own name.
    EXPECT_EQ(mode.digestOf("app/x.txt"), mode.digestOf("app/x.*"));
}

// ---- writeSelection -----------------------------------------------------

std::map<std::string, std::string> extract(const std::string& tarPath, const std::string& into,
                                           bool busybox = false) {
    fs::remove_all(into);
    fs::create_directories(into);
    std::string cmd =
        (busybox ? "busybox tar -xf '" : "tar -xf '") + tarPath + "' -C '" + into + "' 2>&1";
    std::string out = test::commandOutput(cmd + "; echo rc=$?");
    EXPECT_TRUE(out.ends_with("rc=0\n")) << cmd << ": " << out;
    EXPECT_EQ(out, "rc=0\n") << "warnings from " << cmd;
    return tree(into);
}

bool haveBusybox() { return std::system("busybox tar --help >/dev/null 2>&1") == 0; }

TEST(BuildContext, WriteSelectionGivesDockerCopySemantics) {
    test::TempDir dir;
    std::string root = dir.path() + "/ctx";
    makeTree(root);
    auto ctx = BuildContext::open(makeTar(dir.path(), root));
    std::string out = dir.path() + "/out.tar";
    std::map<std::string, std::string> appTree = {{"x.txt", "f:hello x"},
                                                  {"run.sh", "f:#!/bin/sh\necho run\n"},
                                                  {"sub", "d"},
                                                  {"sub/y.txt", "f:why"},
                                                  {"link", "l:x.txt"}};
    for (bool busybox : {false, true}) {
        if (busybox && !haveBusybox()) continue;
        SCOPED_TRACE(busybox ? "busybox tar" : "GNU tar");
        std::string into = dir.path() + "/into";
        EXPECT_EQ(ctx.writeSelection("app/", out), 5u);
        EXPECT_EQ(extract(out, into, busybox), appTree);
        EXPECT_EQ(modeOf(into + "/run.sh"), 0755u);
        EXPECT_EQ(modeOf(into + "/sub"), 0700u);
        EXPECT_EQ(ctx.writeSelection("app", out), 5u);
        EXPECT_EQ(extract(out, into, busybox), appTree);

        EXPECT_EQ(ctx.writeSelection("app/x.txt", out), 1u);
        EXPECT_EQ(extract(out, into, busybox),
                  (std::map<std::string, std::string>{{"x.txt", "f:hello x"}}));
        EXPECT_EQ(ctx.writeSelection("app/link", out), 1u);
        EXPECT_EQ(extract(out, into, busybox),
                  (std::map<std::string, std::string>{{"link", "l:x.txt"}}));

        // Everything, the long path included.
        EXPECT_EQ(ctx.writeSelection(".", out), ctx.entries().size());
        auto all = extract(out, into, busybox);
        EXPECT_EQ(all.at(kLongPath), "f:deep file");
        EXPECT_EQ(all.at("app/link"), "l:x.txt");
        EXPECT_EQ(all.at("empty"), "d");
        EXPECT_EQ(all.size(), ctx.entries().size());

        // A glob: each match as a source of its own.
        EXPECT_EQ(ctx.writeSelection("*.txt", out), 1u);
        EXPECT_EQ(extract(out, into, busybox),
                  (std::map<std::string, std::string>{{"other.txt", "f:other"}}));

        // An empty directory: nothing to write, and no error.
        EXPECT_EQ(ctx.writeSelection("empty", out), 0u);
        EXPECT_TRUE(extract(out, into, busybox).empty());
    }
}

TEST(BuildContext, WriteSelectionSkipsWhatTheFilterSays) {
    test::TempDir dir;
    std::string root = dir.path() + "/ctx";
    makeTree(root);
    auto ctx = BuildContext::open(makeTar(dir.path(), root));
    std::string out = dir.path() + "/out.tar";
    std::vector<std::string> asked;
    auto skip = [&](std::string_view path) {
        asked.emplace_back(path);
        return path == "app/x.txt" || path == "app/sub";
    };
    EXPECT_EQ(ctx.writeSelection("app", out, skip), 3u);
    EXPECT_EQ(
        std::set<std::string>(asked.begin(), asked.end()),
        (std::set<std::string>{"app/x.txt", "app/run.sh", "app/sub", "app/sub/y.txt", "app/link"}));
    // The skipped directory's file stays (the filter decides each path).
    EXPECT_EQ(extract(out, dir.path() + "/into"),
              (std::map<std::string, std::string>{{"run.sh", "f:#!/bin/sh\necho run\n"},
                                                  {"sub", "d"},
                                                  {"sub/y.txt", "f:why"},
                                                  {"link", "l:x.txt"}}));
}

TEST(BuildContext, WriteSelectionCarriesLongNamesAndLinks) {
    test::TempDir dir;
    std::string root = dir.path() + "/ctx";
    // 120 + 1 + 90: fits ustar's prefix; 3 x 120: needs a GNU long name.
    std::string prefixed = "top/" + std::string(116, 'p') + "/" + std::string(90, 'q');
    std::string veryLong =
        "top/" + std::string(120, 'a') + "/" + std::string(120, 'b') + "/" + std::string(120, 'c');
    std::string noSlashFit = "top/" + std::string(200, 'r') + "/f";
    std::string longTarget = "../" + std::string(120, 't') + "/" + std::string(60, 'u');
    writeFile(root + "/" + prefixed, "prefixed");
    writeFile(root + "/" + veryLong, "very long");
    writeFile(root + "/" + noSlashFit, "no slash fit");
    mkdir(root + "/top/" + std::string(150, 'D'));
    ::symlink(longTarget.c_str(), (root + "/top/longlink").c_str());
    auto ctx = BuildContext::open(makeTar(dir.path(), root));
    std::string out = dir.path() + "/out.tar";
    for (bool busybox : {false, true}) {
        if (busybox && !haveBusybox()) continue;
        SCOPED_TRACE(busybox ? "busybox tar" : "GNU tar");
        ctx.writeSelection("top", out);
        auto t = extract(out, dir.path() + "/into", busybox);
        EXPECT_EQ(t.at(prefixed.substr(4)), "f:prefixed");
        EXPECT_EQ(t.at(veryLong.substr(4)), "f:very long");
        EXPECT_EQ(t.at(noSlashFit.substr(4)), "f:no slash fit");
        EXPECT_EQ(t.at(std::string(150, 'D')), "d");
        EXPECT_EQ(t.at("longlink"), "l:" + longTarget);
    }
    // And our own output reads back through our own index, entry for entry.
    ctx.writeSelection(".", out);
    auto again = BuildContext::open(out);
    EXPECT_EQ(paths(again.entries()), paths(ctx.entries()));
    EXPECT_EQ(again.digestOf("."), ctx.digestOf("."));
    EXPECT_EQ(again.digestOf("top"), ctx.digestOf("top/"));
}

TEST(BuildContext, WriteSelectionNoticesAChangedContext) {
    test::TempDir dir;
    std::string root = dir.path() + "/ctx";
    writeFile(root + "/a.txt", "original");
    std::string tarPath = makeTar(dir.path(), root);
    auto ctx = BuildContext::open(tarPath);
    // The same size, other bytes, at the indexed offset.
    std::string bytes = readFile(tarPath);
    bytes.replace(ctx.entries()[0].dataOffset, 8, "tampered");
    writeFile(tarPath, bytes);
    std::string out = dir.path() + "/out.tar";
    EXPECT_EQ(codeOf([&] { ctx.writeSelection("a.txt", out); }), ErrorCode::internal);
    EXPECT_FALSE(fs::exists(out));
}

TEST(BuildContext, WriteSelectionRefusesTwoMatchesOfDifferentKindsAtOnePath) {
    test::TempDir dir;
    std::string bytes =
        entry({.name = "a1/x/y", .data = "y"}) + entry({.name = "a2/x", .data = "file"}) +
        entry({.name = "b1/same", .data = "1"}) + entry({.name = "b2/same", .data = "2"}) + kEnd;
    auto ctx = BuildContext::open(writeTar(dir.path(), bytes));
    EXPECT_EQ(codeOf([&] { ctx.writeSelection("a*", dir.path() + "/out.tar"); }),
              ErrorCode::unprocessable);
    // Two files at one path: the later match wins, and the digest keys that one.
    std::string out = dir.path() + "/out.tar";
    EXPECT_EQ(ctx.writeSelection("b*", out), 1u);
    EXPECT_EQ(extract(out, dir.path() + "/into"),
              (std::map<std::string, std::string>{{"same", "f:2"}}));
    EXPECT_EQ(ctx.digestOf("b*"), ctx.digestOf("b2"));
}

}  // namespace
}  // namespace airlock::templates

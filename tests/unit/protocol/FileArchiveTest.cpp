#include <gtest/gtest.h>

#include <vector>

#include "protocol/FileArchive.hpp"
#include "protocol/Messages.hpp"

namespace airlock::protocol {
namespace {

struct Seen {
    char kind;
    std::string path;
    std::uint32_t mode;
    std::string data;
};

std::vector<Seen> readAll(const std::string& stream, std::size_t piece, bool* complete = nullptr) {
    std::vector<Seen> seen;
    ArchiveReader reader(
        {[&](const ArchiveEntry& e) {
             seen.push_back({e.kind, e.path, e.mode, ""});
         },
         [&](const ArchiveEntry&, std::string_view b) { seen.back().data.append(b); }, nullptr});
    for (std::size_t i = 0; i < stream.size(); i += piece)
        reader.feed(std::string_view(stream).substr(i, piece));
    if (complete) *complete = reader.complete();
    return seen;
}

TEST(FileArchive, RoundTripsWhateverTheSplit) {
    std::string s = archiveHeader(archive::kDirectory, "src", 0755, 0);
    s += archiveHeader(archive::kFile, "src/app.py", 0644, 5) + "hello";
    s += archiveHeader(archive::kFile, "empty", 0600, 0);
    s += archiveHeader(archive::kSymlink, "link", 0777, 7) + "src/app";
    s += archiveHeader(archive::kRemove, "old/stuff", 0, 0);
    for (std::size_t piece : {1u, 2u, 7u, 4096u}) {
        bool complete = false;
        auto seen = readAll(s, piece, &complete);
        ASSERT_EQ(seen.size(), 5u) << piece;
        EXPECT_TRUE(complete);
        EXPECT_EQ(seen[1].path, "src/app.py");
        EXPECT_EQ(seen[1].data, "hello");
        EXPECT_EQ(seen[1].mode, 0644u);
        EXPECT_EQ(seen[2].data, "");
        EXPECT_EQ(seen[3].kind, archive::kSymlink);
        EXPECT_EQ(seen[3].data, "src/app");
        EXPECT_EQ(seen[4].kind, archive::kRemove);
    }
}

TEST(FileArchive, ACutStreamIsNotComplete) {
    std::string s = archiveHeader(archive::kFile, "a", 0644, 10) + "12345";
    bool complete = true;
    readAll(s, 3, &complete);
    EXPECT_FALSE(complete);
}

TEST(FileArchive, PathsThatLeaveTheTreeAreRefused) {
    for (const char* p : {"../x", "/etc/passwd", "a/../../b", "a//b", "./a", "", "a/."})
        EXPECT_FALSE(isSafeRelativePath(p)) << p;
    for (const char* p : {"a", "a/b", ".git/config", "..a/b..", "a b/c"})
        EXPECT_TRUE(isSafeRelativePath(p)) << p;
    EXPECT_THROW(archiveHeader(archive::kFile, "../x", 0644, 0), MessageError);
    // A hostile writer cannot slip one past the reader either.
    std::string evil = archiveHeader(archive::kFile, "ab", 0644, 0);
    evil[3] = '.';
    evil[4] = '.';
    EXPECT_THROW(readAll(evil, 1), MessageError);
}

TEST(FileArchive, MalformedHeadersAreRefused) {
    std::string badKind = archiveHeader(archive::kFile, "a", 0644, 0);
    badKind[0] = 'Z';
    EXPECT_THROW(readAll(badKind, 100), MessageError);
    std::string badMode = archiveHeader(archive::kFile, "a", 0644, 0);
    badMode[4] = '\x7f';  // the mode's top byte
    EXPECT_THROW(readAll(badMode, 100), MessageError);
    std::string zeroPath("F\0\0", 3);
    EXPECT_THROW(readAll(zeroPath, 100), MessageError);
    std::string hugeLink = archiveHeader(archive::kSymlink, "l", 0777, 1 << 20);
    EXPECT_THROW(readAll(hugeLink, 100), MessageError);
    std::string dirWithBytes = archiveHeader(archive::kDirectory, "d", 0755, 3);
    EXPECT_THROW(readAll(dirWithBytes, 100), MessageError);
}

}  // namespace
}  // namespace airlock::protocol

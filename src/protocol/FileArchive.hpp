#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace airlock::protocol {

// The stream of files the host writes into a guest directory in one go (a
// repository checkout, a reset), in a format both sides define here rather
// than tar: every field is bounded and checked, and there is nothing to
// misread (no links to other entries, no absolute paths, no "..").
//
//   kind u8 | path_len u16 BE | path | mode u32 BE | size u64 BE | size bytes
//
// kind: 'D' directory, 'F' regular file (its bytes follow), 'L' symlink (its
// target follows), 'R' remove the path (recursively). Paths are relative,
// '/'-separated, with no empty, "." or ".." part and no NUL.
namespace archive {
inline constexpr char kDirectory = 'D';
inline constexpr char kFile = 'F';
inline constexpr char kSymlink = 'L';
inline constexpr char kRemove = 'R';
inline constexpr std::size_t kMaxPath = 4096;
inline constexpr std::uint64_t kMaxLinkTarget = 4096;
inline constexpr std::size_t kHeaderFixed = 1 + 2 + 4 + 8;  // without the path
}  // namespace archive

// True for a path the archive may carry.
bool isSafeRelativePath(std::string_view path);

// The header of one entry; a file's or link's bytes follow it (appendFileData).
std::string archiveHeader(char kind, const std::string& path, std::uint32_t mode,
                          std::uint64_t size);

struct ArchiveEntry {
    char kind = 0;
    std::string path;
    std::uint32_t mode = 0;
    std::uint64_t size = 0;
};

// Incremental reader: feed() any split of the stream; the callbacks see each
// entry's header, its bytes in pieces, and its end. Throws MessageError on a
// malformed header (the writer then resets the stream).
class ArchiveReader {
  public:
    struct Callbacks {
        std::function<void(const ArchiveEntry&)> begin;
        std::function<void(const ArchiveEntry&, std::string_view)> data;
        std::function<void(const ArchiveEntry&)> end;
    };
    explicit ArchiveReader(Callbacks callbacks) : cb_(std::move(callbacks)) {}
    void feed(std::string_view bytes);
    // At the end of the stream: false when an entry was cut short.
    bool complete() const { return header_.empty() && remaining_ == 0 && !inEntry_; }

  private:
    void parseHeader();
    Callbacks cb_;
    std::string header_;
    ArchiveEntry entry_;
    std::uint64_t remaining_ = 0;
    bool inEntry_ = false;
};

}  // namespace airlock::protocol

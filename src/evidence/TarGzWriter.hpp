#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace airlock {

// The tar format's record unit: headers and file data are padded to it.
constexpr std::size_t kTarBlock = 512;

// A reproducible .tar.gz built in memory: entries sorted by path, owner
// root:root (uid 0, no names), one fixed modification time, directories made
// explicit, POSIX ustar with a pax header only for a path too long for
// ustar. gzip carries no name and no time. The same files in give the same
// bytes out, whatever order they were added in.
class TarGzWriter {
  public:
    explicit TarGzWriter(std::int64_t mtime) : mtime_(mtime) {}
    // A regular file at a relative path ("a/b.txt"); no "..", no leading "/",
    // no empty segment. Adding a path twice replaces the earlier content.
    void add(const std::string& path, std::string_view content, unsigned mode = 0644);
    std::string finish() const;  // the .tar.gz bytes
    std::string tar() const;     // the uncompressed tar (for tests and sizes)

  private:
    std::int64_t mtime_;
    std::map<std::string, std::pair<std::string, unsigned>> files_;
};

// gzip of bytes (level 9, no name, no time): deterministic.
std::string gzipBytes(std::string_view data);

}  // namespace airlock

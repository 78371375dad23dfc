#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::templates {

// One entry of a build context: a file, a directory or a symlink.
struct ContextEntry {
    std::string path;  // normalized, relative, no leading ./; directories without trailing slash
    char type = '0';   // '0' file, '5' directory, '2' symlink
    std::uint32_t mode = 0;        // permission bits (07777)
    std::uint64_t size = 0;        // file bytes; 0 for directories and symlinks
    std::uint64_t dataOffset = 0;  // where a file's bytes start in the tar
    std::string linkTarget;        // symlinks: as archived (may point anywhere; copied as a link)
    std::string sha256;            // hex, files only
    std::int64_t mtime = 0;        // seconds; written back by writeSelection, not in digestOf
};

// An index over a build context: a plain POSIX tar file on disk (ustar, GNU
// longname/longlink, pax), read once and hashed as it is read. A gzip (or
// other compressed) context is refused with Error(bad_request): the index
// points into the file by offset, which a compressed stream has none of; the
// client decompresses, or the API layer does before it stores the file.
//
// Entries are in archive order; an entry named twice takes the later one's
// place (as extraction would). What is refused, with Error(bad_request): a
// malformed or truncated archive (bad checksum, bad number, no end-of-archive
// zero block), an absolute path, a '..' component, a path running through a
// symlink or file of the archive, hardlinks, devices, FIFOs and sparse or
// multi-volume entries, more than `maxEntries` entries, file bytes over
// `maxBytes`. The root entry ("./") names nothing to copy and is dropped.
class BuildContext {
  public:
    static BuildContext open(const std::string& tarPath, std::size_t maxEntries = 100000,
                             std::uint64_t maxBytes = 8ull << 30);

    const std::vector<ContextEntry>& entries() const { return entries_; }

    // The entries a copy of `src` takes, in archive order: "app" or "app/"
    // (a directory: it and everything under it; "app/" must be one),
    // "app/x.txt" (that entry), "", "." or "./" (everything). A leading '/'
    // is the context's root and '..' may not climb out of it, as in
    // Docker. Components holding * ? [ match as Go's filepath.Match (within
    // one component; '\' escapes), as Docker's COPY globs do.
    // Error(unprocessable) "copy source 'x' is not in the build context"
    // when nothing matches; Error(bad_request) for a malformed source.
    std::vector<ContextEntry> select(std::string_view src) const;

    // SHA-256 (hex) over what a copy of `src` writes, sorted by the path it
    // lands at: (path relative to src, type, mode, size, sha256 or link
    // target). The layer cache keys a copy step by it, so it changes with
    // any selected entry and with nothing outside the selection.
    std::string digestOf(std::string_view src) const;

    // Writes a plain ustar file of what a copy of `src` writes, with paths
    // relative to the match (Docker's COPY: "app/" or "app" gives app's
    // contents, "app/x.txt" gives a file x.txt, a glob gives each match
    // that way). Entries for which skip(context-relative path) is true are
    // left out; a skipped directory does not skip what is under it (the
    // filter decides each path, as .dockerignore's '!' needs). Owner 0:0,
    // the archived mode and mtime; long names through the ustar prefix or a
    // GNU 'L'/'K' entry (GNU tar and busybox read both). Returns the number
    // of entries written. Error(internal) when the context file changed
    // since open() or the output cannot be written (the output is removed).
    std::size_t writeSelection(std::string_view src, const std::string& outTarPath,
                               const std::function<bool(std::string_view)>& skip = {}) const;

  private:
    BuildContext() = default;  // only open() makes one

    // One entry a copy writes, at `relPath` under the copy's destination.
    struct Planned {
        std::string relPath;
        std::size_t index;  // into entries_
    };
    struct Plan {
        std::vector<std::size_t> selected;  // what select() returns
        std::vector<Planned> writes;        // what lands, one per relPath
    };
    Plan plan(std::string_view src) const;

    std::string tarPath_;
    std::vector<ContextEntry> entries_;
};

}  // namespace airlock::templates

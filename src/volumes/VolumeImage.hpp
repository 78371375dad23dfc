#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/UniqueFd.hpp"
#include "volumes/ToolRunner.hpp"
#include "volumes/VolumeEntry.hpp"

namespace airlock {

class DebugfsScript;

// Host-side access to the files of a detached ext4 volume image (a raw
// file) without mounting it: e2fsprogs' tools (debugfs, e2fsck, resize2fs,
// mkfs.ext4) read and write the filesystem in the file, and nothing the image
// holds is ever resolved on the host. A guest's root wrote the image, so:
//  - every path is checked one component at a time and a symbolic link
//    anywhere in it is refused (Error bad_request), never followed, not even
//    inside the volume;
//  - the tools get the image as an already opened descriptor (/dev/fd/3),
//    opened here without following a link, so a swapped image path cannot
//    point them at a host device;
//  - each tool runs with a deadline, memory, CPU and file-size bounds, and
//    as `user` when one is given and this process is root. The caller makes
//    the image file readable and writable by that uid, and a file to write()
//    readable by it (the tools reopen both through /dev/fd).
// The image must not be attached to a running VM, and one VolumeImage at a
// time may change it. Reads use debugfs's read-only catastrophic mode, which
// ignores the journal: after a guest stopped uncleanly, recoverJournal()
// first (write, remove and grow do it themselves).
class VolumeImage {
  public:
    explicit VolumeImage(std::string imagePath, ToolUser user = {},
                         std::chrono::milliseconds timeout = std::chrono::seconds(60));

    // Creates `imagePath` (O_EXCL, mode 0600, sparse) of sizeBytes and makes
    // an ext4 filesystem in it whose root directory is ownerUid:ownerGid, with
    // no reserved blocks. mkfs runs as this process: the file is new. Throws
    // Error(already_exists) when the path exists; removes the file on failure.
    static void format(const std::string& imagePath, std::uint64_t sizeBytes, unsigned ownerUid,
                       unsigned ownerGid,
                       std::chrono::milliseconds timeout = std::chrono::seconds(60));

    // Whether the journal holds changes not yet in the filesystem.
    bool needsRecovery();
    // Replays the journal when the filesystem needs it (e2fsck -E
    // journal_only); on a clean one, nothing is run and nothing written.
    void recoverJournal();
    // Grows the file and the filesystem in it (e2fsck -f -p, then
    // resize2fs); a smaller size: Error(bad_request). A filesystem e2fsck -p
    // cannot repair: Error(unprocessable).
    void grow(std::uint64_t newSizeBytes);

    // What is at `path` (absolute; normalizePath's rules). Error(not_found)
    // when absent, Error(bad_request) when any component, the last one too,
    // is a symbolic link.
    VolumeStat stat(const std::string& path);
    // A directory's entries, without "." and ".."; a listing over 32 MiB of
    // debugfs output: Error(payload_too_large).
    std::vector<VolumeEntry> list(const std::string& dirPath);
    // Streams a regular file's bytes to `sink` in chunks; `sink` returns
    // false to stop early. Never more than the size stat() gives. Anything
    // but a regular file: Error(bad_request).
    void read(const std::string& path, const std::function<bool(std::string_view)>& sink);
    // Writes hostFile's bytes to `path`, replacing a regular file there (not
    // atomically: the old one goes first), making missing parent directories
    // (uid:gid, 0755). The file gets uid:gid and `mode`. A directory or
    // another non-regular file there: Error(conflict); a link:
    // Error(bad_request); the volume full: Error(insufficient_storage).
    void write(const std::string& path, const std::string& hostFile, unsigned uid, unsigned gid,
               unsigned mode = 0644);
    // Removes a file, a symbolic link (itself, never what it names) or an
    // empty directory. Absent: Error(not_found); a directory with entries:
    // Error(conflict).
    void remove(const std::string& path);

    // Bytes the image file takes on the host (st_blocks * 512).
    static std::uint64_t usedBytes(const std::string& imagePath);
    // "/a/./b//c" -> "/a/b/c". Refuses (Error bad_request) relative paths,
    // "..", NUL and control characters, double quotes and backslashes
    // (debugfs's own quoting), components over 255 bytes, paths over 4096.
    static std::string normalizePath(const std::string& path);

  private:
    struct Lookup;

    UniqueFd openImage(bool writable) const;
    Lookup lookup(const std::string& path, const std::vector<std::string>& extraCommands = {},
                  bool lastMayBeLink = false);
    // lookup() with "feature" after it, the journal replayed first when it needs it.
    Lookup lookupForChange(const std::string& path, bool lastMayBeLink);
    ToolResult runScript(const DebugfsScript& script, bool writable, int hostFd = -1);
    // e2fsck or resize2fs on the image; their first 64 KiB of stdout kept.
    ToolResult runTool(const std::string& tool, std::vector<std::string> args, bool writable);

    std::string imagePath_;
    ToolRunner runner_;
};

}  // namespace airlock

#pragma once
#include <fcntl.h>
#include <sys/stat.h>

#include <cstdint>
#include <string>

#include "core/UniqueFd.hpp"

namespace airlock {

// File operations that root does inside directories an unprivileged QEMU can
// write (a sandbox's own directory). Every step goes through directory file
// descriptors with O_NOFOLLOW, so a symlink or a swapped directory planted by
// a compromised QEMU can never redirect a read, chmod, chown, link or remove
// to a host file. All throw Error(internal) on failure unless noted.
namespace safefs {

// A directory, never through a symlink at its last component.
UniqueFd openDir(const std::string& path);
// A regular file `name` in `dir` (O_NOFOLLOW; anything but a regular file is
// refused; with singleLink, so is a file with other hard links).
UniqueFd openFileAt(int dir, const std::string& name, int flags = O_RDONLY, bool singleLink = false);
// The last `maxBytes` of a regular file; "" when it is missing or not a regular file.
std::string readTail(const std::string& dirPath, const std::string& name, std::size_t maxBytes);
// Removes `path` and everything under it without following any symlink;
// a missing path is fine.
void removeTree(const std::string& path);
// Hard-links the regular file `name` of `fromDir` as `toName` in `toDir`
// (the file opened and checked is exactly the one linked). Returns the
// linked file, open read-only, for fchmod/fchown.
UniqueFd linkFile(const std::string& fromDir, const std::string& name, const std::string& toDir,
                  const std::string& toName);
// SHA-256 (hex) and size of a regular file, opened without following symlinks.
struct FileDigest {
    std::uint64_t size = 0;
    std::string sha256;
};
FileDigest digest(const std::string& path);
// Identity of a file's current content as far as the kernel tracks it
// (device, inode, size, mtime, ctime): any write changes it.
struct FileIdentity {
    std::uint64_t dev = 0, ino = 0, size = 0;
    std::int64_t mtimeNs = 0, ctimeNs = 0;
    bool operator==(const FileIdentity&) const = default;
};
FileIdentity identity(const std::string& path);

}  // namespace safefs
}  // namespace airlock

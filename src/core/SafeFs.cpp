#include "core/SafeFs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/Error.hpp"
#include "core/Sha256Stream.hpp"

namespace airlock::safefs {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
    throw Error(ErrorCode::internal, what + " " + path + ": " + std::strerror(errno));
}

std::pair<std::string, std::string> splitParent(const std::string& path) {
    auto slash = path.find_last_of('/');
    if (slash == std::string::npos) return {".", path};
    return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

constexpr int kMaxDepth = 32;

// Empties the directory open at `dir`. Deeper than kMaxDepth, a directory is
// moved up into `top` (the tree being removed) instead of descended into, so
// neither descriptors nor stack grow with a tree a hostile QEMU made deep;
// `top`'s own loop picks the moved ones up.
void removeContents(int dir, const std::string& where, int depth, int top, unsigned& moved) {
    while (true) {
        int fd = ::dup(dir);
        if (fd < 0) fail("dup", where);
        DIR* d = ::fdopendir(fd);
        if (!d) {
            ::close(fd);
            fail("fdopendir", where);
        }
        ::rewinddir(d);
        std::vector<std::string> entries;
        while (dirent* e = ::readdir(d)) {
            std::string name = e->d_name;
            if (name != "." && name != "..") entries.push_back(name);
            if (entries.size() >= 4096) break;  // bounded per pass; the loop comes back
        }
        ::closedir(d);
        if (entries.empty()) return;
        for (const auto& name : entries) {
            if (::unlinkat(dir, name.c_str(), 0) == 0 || errno == ENOENT) continue;
            if (errno != EISDIR && errno != EPERM) fail("unlink", where + "/" + name);
            if (::unlinkat(dir, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) continue;
            if (depth >= kMaxDepth) {
                std::string flat = ".removing-" + std::to_string(moved++);
                if (::renameat(dir, name.c_str(), top, flat.c_str()) != 0) fail("move up", where + "/" + name);
                continue;
            }
            // A directory (never followed if it became a symlink meanwhile).
            int sub = ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) {
                if (errno == ENOENT) continue;
                fail("open", where + "/" + name);
            }
            UniqueFd subFd(sub);
            removeContents(subFd.get(), where + "/" + name, depth + 1, top, moved);
            if (::unlinkat(dir, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) fail("rmdir", where + "/" + name);
        }
        // Read again until empty: moved-up directories land at the top.
    }
}

}  // namespace

UniqueFd openDir(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) fail("cannot open directory", path);
    return fd;
}

UniqueFd openFileAt(int dir, const std::string& name, int flags, bool singleLink) {
    if (name.empty() || name.find('/') != std::string::npos)
        throw Error(ErrorCode::internal, "bad file name '" + name + "'");
    UniqueFd fd(::openat(dir, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!fd) fail("cannot open", name);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) fail("cannot stat", name);
    if (!S_ISREG(st.st_mode)) throw Error(ErrorCode::internal, name + " is not a regular file");
    // A second name could be a hard link to someone else's file (should the
    // kernel's protected_hardlinks be off): refused where it matters.
    if (singleLink && st.st_nlink != 1) throw Error(ErrorCode::internal, name + " has other links");
    return fd;
}

std::string readTail(const std::string& dirPath, const std::string& name, std::size_t maxBytes) {
    try {
        auto dir = openDir(dirPath);
        auto fd = openFileAt(dir.get(), name, O_RDONLY, true);
        struct stat st {};
        if (::fstat(fd.get(), &st) != 0) return {};
        auto size = static_cast<std::uint64_t>(st.st_size);
        std::uint64_t from = size > maxBytes ? size - maxBytes : 0;
        std::string out(static_cast<std::size_t>(size - from), '\0');
        ssize_t n = ::pread(fd.get(), out.data(), out.size(), static_cast<off_t>(from));
        out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
        return out;
    } catch (const Error&) {
        return {};
    }
}

void removeTree(const std::string& path) {
    auto [parent, name] = splitParent(path);
    UniqueFd parentFd(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!parentFd) {
        if (errno == ENOENT) return;
        fail("cannot open", parent);
    }
    if (::unlinkat(parentFd.get(), name.c_str(), 0) == 0 || errno == ENOENT) return;
    int fd = ::openat(parentFd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return;
        fail("cannot open", path);
    }
    UniqueFd top(fd);
    unsigned moved = 0;
    removeContents(top.get(), path, 0, top.get(), moved);
    if (::unlinkat(parentFd.get(), name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) fail("cannot remove", path);
}

UniqueFd linkFile(const std::string& fromDir, const std::string& name, const std::string& toDir,
                  const std::string& toName) {
    auto from = openDir(fromDir);
    auto file = openFileAt(from.get(), name, O_RDONLY, true);
    auto to = openDir(toDir);
    // Links the inode we opened and checked, not whatever the name points at now.
    std::string self = "/proc/self/fd/" + std::to_string(file.get());
    if (::linkat(AT_FDCWD, self.c_str(), to.get(), toName.c_str(), AT_SYMLINK_FOLLOW) != 0)
        fail("cannot link", fromDir + "/" + name);
    return file;
}

FileDigest digest(const std::string& path) {
    auto [parent, name] = splitParent(path);
    auto dir = openDir(parent);
    auto fd = openFileAt(dir.get(), name);
    Sha256Stream hash;
    std::vector<char> buf(1 << 20);
    FileDigest out;
    while (true) {
        ssize_t n = ::read(fd.get(), buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("cannot read", path);
        if (n == 0) break;
        out.size += static_cast<std::uint64_t>(n);
        hash.update(std::string_view(buf.data(), static_cast<std::size_t>(n)));
    }
    out.sha256 = hash.hexDigest();
    return out;
}

FileIdentity identity(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) fail("cannot stat", path);
    if (!S_ISREG(st.st_mode)) throw Error(ErrorCode::internal, path + " is not a regular file");
    return FileIdentity{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                        static_cast<std::uint64_t>(st.st_size),
                        static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
                        static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec};
}

}  // namespace airlock::safefs

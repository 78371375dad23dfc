#include "agent/WorkspaceStreams.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <vector>

#include "agent/FileStreams.hpp"
#include "agent/GitIgnore.hpp"
#include "agent/GuestFs.hpp"
#include "agent/Sha1.hpp"
#include "protocol/Messages.hpp"

namespace airlock::guest {
namespace {

constexpr std::size_t kMaxIgnoreFile = 1024 * 1024;
constexpr int kMaxDepth = 256;

std::string blobId(int fd, std::uint64_t size) {
    Sha1 h;
    std::string header = "blob " + std::to_string(size);
    header.push_back('\0');
    h.update(header);
    std::string buf(64 * 1024, '\0');
    std::uint64_t total = 0;
    while (total < size) {
        ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        total += static_cast<std::uint64_t>(n);
        h.update(std::string_view(buf.data(), static_cast<std::size_t>(n)));
    }
    // A file that changed under us: an id the host cannot have, so it
    // fetches the bytes and hashes them itself.
    if (total != size) return std::string(40, '0');
    char extra;
    if (::read(fd, &extra, 1) > 0) return std::string(40, '0');
    return h.hexDigest();
}

std::string blobIdOf(std::string_view bytes) {
    Sha1 h;
    std::string header = "blob " + std::to_string(bytes.size());
    header.push_back('\0');
    h.update(header);
    h.update(bytes);
    return h.hexDigest();
}

int removeTreeAt(int dirfd, const std::string& name) {
    if (::unlinkat(dirfd, name.c_str(), 0) == 0) return 0;
    if (errno == ENOENT) return 0;
    if (errno != EISDIR && errno != EPERM) return errno;
    int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno;
    DIR* d = ::fdopendir(fd);
    if (!d) {
        int err = errno;
        ::close(fd);
        return err;
    }
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") names.push_back(n);
    }
    for (const auto& n : names)
        if (int err = removeTreeAt(::dirfd(d), n)) {
            ::closedir(d);
            return err;
        }
    ::closedir(d);
    return ::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) == 0 ? 0 : errno;
}

}  // namespace

WorkspaceScanStream::WorkspaceScanStream(std::uint32_t id, FrameSink& sink,
                                         const protocol::WorkspaceScanRequest& request)
    : StreamHandler(id, sink) {
    start(request);
}

void WorkspaceScanStream::start(const protocol::WorkspaceScanRequest& request) {
    UserEntry user;
    std::string error;
    if (!resolveUser(request.user, user, error)) return fail("bad_request", error);
    auto root = normalizeGuestPath(request.path);
    if (!root) return fail("bad_request", "path must be absolute");
    std::set<std::string> skip(request.skip.begin(), request.skip.end());
    bool listIgnored = request.ignored;
    AsUser as(user.uid, user.gid);
    struct stat rootSt {};
    if (::stat(root->c_str(), &rootSt) != 0)
        return fail(errnoCode(errno), std::string(std::strerror(errno)) + ": " + *root);
    if (!S_ISDIR(rootSt.st_mode)) return fail("conflict", "not a directory: " + *root);
    GitIgnore ignore;
    std::size_t files = 0, ignoredCount = 0;
    bool overflow = false;
    std::function<void(const std::string&, int)> walk = [&](const std::string& rel, int depth) {
        if (overflow || depth > kMaxDepth) return;
        std::string dir = rel.empty() ? *root : *root + "/" + rel;
        {
            UniqueFd gi(::open((dir + "/.gitignore").c_str(),
                               O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
            struct stat st {};
            if (gi && ::fstat(gi.get(), &st) == 0 && S_ISREG(st.st_mode) &&
                static_cast<std::size_t>(st.st_size) <= kMaxIgnoreFile) {
                std::string text(static_cast<std::size_t>(st.st_size), '\0');
                ssize_t n = ::read(gi.get(), text.data(), text.size());
                if (n > 0)
                    ignore.addFile(rel, std::string_view(text.data(), static_cast<std::size_t>(n)));
            }
        }
        DIR* d = ::opendir(dir.c_str());
        if (!d) return;
        std::vector<std::string> names;
        while (dirent* e = ::readdir(d)) {
            std::string n = e->d_name;
            if (n != "." && n != ".." && n != ".git") names.push_back(n);
        }
        ::closedir(d);
        std::sort(names.begin(), names.end());
        for (const auto& name : names) {
            std::string child = rel.empty() ? name : rel + "/" + name;
            if (skip.count(child)) continue;
            std::string full = dir + "/" + name;
            struct stat st {};
            if (::lstat(full.c_str(), &st) != 0) continue;
            bool isDir = S_ISDIR(st.st_mode);
            if (ignore.ignored(child, isDir)) {
                ++ignoredCount;
                if (listIgnored) protocol::appendManifestIgnored(manifest_, child, isDir);
                continue;
            }
            if (files >= kMaxEntries || manifest_.size() >= kMaxManifestBytes) {
                overflow = true;
                return;
            }
            if (isDir) {
                walk(child, depth + 1);
                continue;
            }
            protocol::ManifestFile file;
            file.path = child;
            if (S_ISREG(st.st_mode)) {
                UniqueFd fd(::open(full.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
                if (!fd) continue;
                file.mode = (st.st_mode & S_IXUSR) ? protocol::ManifestFile::Mode::executable
                                                   : protocol::ManifestFile::Mode::file;
                file.id = blobId(fd.get(), static_cast<std::uint64_t>(st.st_size));
            } else if (S_ISLNK(st.st_mode)) {
                char target[4097];
                ssize_t n = ::readlink(full.c_str(), target, sizeof target - 1);
                if (n <= 0) continue;
                file.mode = protocol::ManifestFile::Mode::link;
                file.linkTarget.assign(target, static_cast<std::size_t>(n));
                file.id = blobIdOf(file.linkTarget);
            } else {
                continue;  // fifos, sockets and devices are nothing git records
            }
            protocol::appendManifestFile(manifest_, file);
            ++files;
        }
    };
    walk("", 0);
    if (overflow)
        return fail("too_large", "the working tree has more than " + std::to_string(kMaxEntries) +
                                     " files (or a manifest over 64 MiB)");
    summary_ = {{"files", files}, {"ignored", ignoredCount}, {"bytes", manifest_.size()}};
    sendControl(protocol::ManifestSize{manifest_.size()});
}

void WorkspaceScanStream::tick(std::int64_t) {
    while (!done() && sent_ < manifest_.size()) {
        std::size_t room = sendable();
        if (room == 0) return;
        std::size_t n = std::min(room, manifest_.size() - sent_);
        sendData(1, std::string_view(manifest_).substr(sent_, n));
        sent_ += n;
    }
    if (!done() && sent_ >= manifest_.size()) finish(summary_);
}

ArchiveUnpackStream::ArchiveUnpackStream(std::uint32_t id, FrameSink& sink,
                                         const protocol::ArchiveUnpackRequest& request)
    : StreamHandler(id, sink) {
    start(request);
}

void ArchiveUnpackStream::start(const protocol::ArchiveUnpackRequest& request) {
    std::string error;
    if (!resolveUser(request.user, user_, error)) return fail("bad_request", error);
    auto root = normalizeGuestPath(request.path);
    if (!root || *root == "/") return fail("bad_request", "path must be an absolute directory");
    root_ = *root;
    struct stat st {};
    if (::stat(root_.c_str(), &st) != 0) {
        // Made by root (its parents may be root's), then given to the user.
        if (int err = makeDirs(root_, 0755))
            return fail(errnoCode(err), std::string(std::strerror(err)) + ": " + root_);
        if (::chown(root_.c_str(), user_.uid, user_.gid) != 0)
            return fail(errnoCode(errno), std::string(std::strerror(errno)) + ": " + root_);
    }
    AsUser as(user_.uid, user_.gid);
    rootFd_.reset(::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!rootFd_) return fail(errnoCode(errno), std::string(std::strerror(errno)) + ": " + root_);
    reader_ = std::make_unique<protocol::ArchiveReader>(protocol::ArchiveReader::Callbacks{
        [this](const protocol::ArchiveEntry& e) { begin(e); },
        [this](const protocol::ArchiveEntry& e, std::string_view b) { data(e, b); },
        [this](const protocol::ArchiveEntry& e) { end(e); }});
}

int ArchiveUnpackStream::dirFd(const std::string& rel) {
    if (rel.empty()) return rootFd_.get();
    if (auto it = dirs_.find(rel); it != dirs_.end()) return it->second.get();
    auto slash = rel.rfind('/');
    std::string parentRel = slash == std::string::npos ? "" : rel.substr(0, slash);
    std::string name = slash == std::string::npos ? rel : rel.substr(slash + 1);
    int parent = dirFd(parentRel);
    if (parent < 0) return -1;
    int fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && (errno == ENOTDIR || errno == ELOOP)) {
        // A file or a link where the archive wants a directory: replaced.
        if (int err = removeTreeAt(parent, name)) {
            errno = err;
            return -1;
        }
        fd = -1;
        errno = ENOENT;
    }
    if (fd < 0 && errno == ENOENT) {
        if (::mkdirat(parent, name.c_str(), 0755) != 0 && errno != EEXIST) return -1;
        fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) return -1;
    if (dirs_.size() > 4096) dirs_.clear();
    return dirs_.emplace(rel, UniqueFd(fd)).first->second.get();
}

void ArchiveUnpackStream::begin(const protocol::ArchiveEntry& e) {
    if (error_) return;
    auto slash = e.path.rfind('/');
    std::string parentRel = slash == std::string::npos ? "" : e.path.substr(0, slash);
    std::string name = slash == std::string::npos ? e.path : e.path.substr(slash + 1);
    auto failWith = [&](int err) {
        error_ = err;
        errorPath_ = e.path;
    };
    if (e.kind == protocol::archive::kDirectory) {
        if (dirFd(e.path) < 0) failWith(errno);
        return;
    }
    if (e.kind == protocol::archive::kRemove) {
        // Only an existing parent: removing never makes directories.
        int parent = rootFd_.get();
        if (!parentRel.empty()) {
            parent = ::openat(rootFd_.get(), parentRel.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (parent < 0) return;  // already gone (or never there)
            // A parent reached through a link is left alone.
            char real[4096];
            std::string self = "/proc/self/fd/" + std::to_string(parent);
            ssize_t n = ::readlink(self.c_str(), real, sizeof real - 1);
            std::string want = root_ + "/" + parentRel;
            if (n <= 0 || std::string(real, static_cast<std::size_t>(n)) != want) {
                ::close(parent);
                return;
            }
        }
        int err = removeTreeAt(parent, name);
        if (parent != rootFd_.get()) ::close(parent);
        if (err) failWith(err);
        dirs_.clear();
        return;
    }
    int parent = dirFd(parentRel);
    if (parent < 0) return failWith(errno);
    if (int err = removeTreeAt(parent, name)) return failWith(err);
    dirs_.erase(e.path);
    if (e.kind == protocol::archive::kFile) {
        file_.reset(::openat(parent, name.c_str(),
                             O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                             static_cast<mode_t>(e.mode & 0777)));
        if (!file_) return failWith(errno);
        ::fchmod(file_.get(), static_cast<mode_t>(e.mode & 0777));
    } else {
        linkTarget_.clear();
    }
}

void ArchiveUnpackStream::data(const protocol::ArchiveEntry& e, std::string_view bytes) {
    if (error_) return;
    bytes_ += bytes.size();
    if (e.kind == protocol::archive::kSymlink) {
        linkTarget_.append(bytes);
        return;
    }
    while (!bytes.empty()) {
        ssize_t n = ::write(file_.get(), bytes.data(), bytes.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            error_ = errno;
            errorPath_ = e.path;
            return;
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
}

void ArchiveUnpackStream::end(const protocol::ArchiveEntry& e) {
    if (error_) return;
    ++entries_;
    if (e.kind == protocol::archive::kFile) {
        if (::close(file_.release()) != 0) {
            error_ = errno;
            errorPath_ = e.path;
        }
    } else if (e.kind == protocol::archive::kSymlink) {
        auto slash = e.path.rfind('/');
        int parent = dirFd(slash == std::string::npos ? "" : e.path.substr(0, slash));
        std::string name = slash == std::string::npos ? e.path : e.path.substr(slash + 1);
        if (parent < 0 || ::symlinkat(linkTarget_.c_str(), parent, name.c_str()) != 0) {
            error_ = errno;
            errorPath_ = e.path;
        }
    }
}

void ArchiveUnpackStream::onData(std::uint8_t channel, std::string bytes) {
    if (done()) return;
    if (channel != 0) return fail("bad_frame", "an archive comes on channel 0");
    AsUser as(user_.uid, user_.gid);
    try {
        reader_->feed(bytes);
    } catch (const protocol::MessageError& e) {
        return fail("bad_request", e.message);
    }
    if (error_)
        return fail(errnoCode(error_), std::string(std::strerror(error_)) + ": " + errorPath_);
    grant(bytes.size());
}

void ArchiveUnpackStream::onCloseWrite() {
    if (done()) return;
    if (!reader_->complete()) return fail("bad_request", "the archive ended inside an entry");
    file_.reset();
    finish({{"path", root_}, {"entries", entries_}, {"bytes", bytes_}});
}

}  // namespace airlock::guest

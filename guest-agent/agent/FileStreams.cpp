#include "agent/FileStreams.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <ctime>
#include <vector>

#include "agent/GuestFs.hpp"
#include "protocol/Frame.hpp"
#include "protocol/JsonText.hpp"

namespace airlock::guest {
namespace {

std::string errText(int err) { return std::strerror(err); }

int removeTree(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return errno;
    if (S_ISDIR(st.st_mode)) {
        DIR* d = ::opendir(path.c_str());
        if (!d) return errno;
        std::vector<std::string> names;
        while (dirent* e = ::readdir(d)) {
            std::string n = e->d_name;
            if (n != "." && n != "..") names.push_back(n);
        }
        ::closedir(d);
        for (const auto& n : names)
            if (int err = removeTree(path + "/" + n)) return err;
        return ::rmdir(path.c_str()) == 0 ? 0 : errno;
    }
    return ::unlink(path.c_str()) == 0 ? 0 : errno;
}

class FsOpStream : public StreamHandler {
  public:
    FsOpStream(std::uint32_t id, FrameSink& sink, const protocol::FsRequest& request)
        : StreamHandler(id, sink) {
        run(request);
    }

  private:
    void run(const protocol::FsRequest& request) {
        using Action = protocol::FsRequest::Action;
        UserEntry user;
        std::string error;
        if (!resolveUser(request.user, user, error)) return fail("bad_request", error);
        std::string path;
        if (!absolutePath(request.path, path)) return fail("bad_request", "path must be absolute");
        Action action = request.action;
        AsUser as(user.uid, user.gid);
        int err = 0;
        if (action == Action::stat || action == Action::list) {
            auto entry = statEntry(path, nameOf(path), err);
            if (err) return fail(errnoCode(err), errText(err) + ": " + path);
            protocol::FsResult result{entry, {}, false, {}};
            if (action == Action::list && entry.type == protocol::FileEntry::Type::directory) {
                DIR* d = ::opendir(path.c_str());
                if (!d) return fail(errnoCode(errno), errText(errno) + ": " + path);
                std::vector<protocol::FileEntry> entries;
                std::vector<std::string> names;
                while (dirent* e = ::readdir(d)) {
                    std::string n = e->d_name;
                    if (n != "." && n != "..") names.push_back(n);
                }
                ::closedir(d);
                std::sort(names.begin(), names.end());
                // The answer is one frame: long names, targets and metadata
                // end a listing (truncated) before it would not fit.
                constexpr std::size_t kListBudget = protocol::kMaxPayload - 32 * 1024;
                std::size_t used = 0;
                for (const auto& n : names) {
                    if (entries.size() >= protocol::kMaxListEntries) {
                        result.truncated = true;
                        break;
                    }
                    int e2 = 0;
                    auto child = statEntry(path == "/" ? "/" + n : path + "/" + n, n, e2);
                    if (e2) continue;
                    used += jsonText(protocol::toJsonValue(child)).size() + 1;
                    if (used > kListBudget) {
                        result.truncated = true;
                        break;
                    }
                    entries.push_back(child);
                }
                result.entries = std::move(entries);
            }
            return finish(protocol::toJsonValue(result));
        }
        if (action == Action::mkdir) {
            err = makeDirs(path, 0755);
            if (err) return fail(errnoCode(err), errText(err) + ": " + path);
            return finish(protocol::toJsonValue(statEntry(path, nameOf(path), err)));
        }
        if (action == Action::remove) {
            if (path == "/") return fail("bad_request", "refusing to remove /");
            bool recursive = request.recursive;
            struct stat st {};
            if (::lstat(path.c_str(), &st) != 0)
                return fail(errnoCode(errno), errText(errno) + ": " + path);
            if (S_ISDIR(st.st_mode))
                err = recursive ? removeTree(path) : (::rmdir(path.c_str()) == 0 ? 0 : errno);
            else
                err = ::unlink(path.c_str()) == 0 ? 0 : errno;
            if (err) return fail(errnoCode(err), errText(err) + ": " + path);
            return finish(protocol::toJsonValue(protocol::FsResult{{}, {}, false, path}));
        }
        if (action == Action::move) {
            std::string to;
            if (!absolutePath(request.to, to))
                return fail("bad_request", "'to' must be an absolute path");
            if (::rename(path.c_str(), to.c_str()) != 0)
                return fail(errnoCode(errno), errText(errno) + ": " + path + " -> " + to);
            return finish(protocol::toJsonValue(statEntry(to, nameOf(to), err)));
        }
        fail("bad_request", "unknown fs action");
    }
};

}  // namespace

bool absolutePath(const std::string& path, std::string& out) {
    auto p = normalizeGuestPath(path);
    if (!p) return false;
    out = *p;
    return true;
}

bool resolveUser(const std::string& requested, UserEntry& out, std::string& error) {
    std::string name = requested.empty() ? "user" : requested;
    auto u = lookupUser(name);
    if (!u) {
        error = "unknown user '" + name + "'";
        return false;
    }
    out = *u;
    return true;
}

void runFsOp(std::uint32_t id, FrameSink& sink, const protocol::FsRequest& request) {
    FsOpStream(id, sink, request);
}

FileWriteStream::FileWriteStream(std::uint32_t id, FrameSink& sink,
                                 const protocol::FileWriteRequest& request)
    : StreamHandler(id, sink) {
    start(request);
}

void FileWriteStream::start(const protocol::FileWriteRequest& request) {
    std::string error;
    if (!resolveUser(request.user, user_, error)) return fail("bad_request", error);
    if (!absolutePath(request.path, path_) || path_ == "/")
        return fail("bad_request", "path must be an absolute file path");
    int mode = static_cast<int>(request.mode.value_or(0644));
    if (mode < 0 || mode > 07777) return fail("bad_request", "bad mode");
    asRoot_ = request.asRoot;
    std::optional<AsUser> as;
    if (!asRoot_) as.emplace(user_.uid, user_.gid);
    std::string parent = path_.substr(0, path_.rfind('/'));
    if (!parent.empty())
        if (int err = asRoot_ ? makeDirs(parent, 0755, user_.uid, user_.gid) : makeDirs(parent, 0755))
            return fail(errnoCode(err), errText(err) + ": " + parent);
    struct stat st {};
    if (::stat(path_.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        return fail("conflict", "is a directory: " + path_);
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, ".airlock-upload-%d-%u", ::getpid(), id());
    tempPath_ = path_ + suffix;
    fd_.reset(::open(tempPath_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                     static_cast<mode_t>(mode)));
    if (!fd_) return fail(errnoCode(errno), errText(errno) + ": " + path_);
    ::fchmod(fd_.get(), static_cast<mode_t>(mode));  // not narrowed by the umask
    if (asRoot_ && ::fchown(fd_.get(), user_.uid, user_.gid) != 0)
        return fail(errnoCode(errno), errText(errno) + ": " + path_);
    // On the new file before it replaces the old: the target's whole set
    // becomes this one (an upload without metadata leaves it none).
    if (int err = writeFileMetadata(fd_.get(), request.metadata))
        return fail(errnoCode(err), errText(err) + ": metadata of " + path_);
}

FileWriteStream::~FileWriteStream() {
    if (fd_) {
        // Aborted (reset, host gone, error): the target keeps its old content.
        fd_.reset();
        std::optional<AsUser> as;
        if (!asRoot_) as.emplace(user_.uid, user_.gid);
        ::unlink(tempPath_.c_str());
    }
}

void FileWriteStream::onData(std::uint8_t channel, std::string bytes) {
    if (done()) return;
    if (channel != 0) return fail("bad_frame", "uploads take data on channel 0");
    std::size_t off = 0;
    while (off < bytes.size()) {
        ssize_t n = ::write(fd_.get(), bytes.data() + off, bytes.size() - off);
        if (n < 0) {
            if (errno == EINTR) continue;
            int err = errno;
            fail(errnoCode(err), errText(err) + ": " + path_);
            return;
        }
        off += static_cast<std::size_t>(n);
    }
    size_ += bytes.size();
    grant(bytes.size());
}

void FileWriteStream::onCloseWrite() {
    if (done()) return;
    std::optional<AsUser> as;
    if (!asRoot_) as.emplace(user_.uid, user_.gid);
    if (::fsync(fd_.get()) != 0 || ::close(fd_.release()) != 0)
        return fail(errnoCode(errno), errText(errno) + ": " + path_);
    if (::rename(tempPath_.c_str(), path_.c_str()) != 0) {
        int err = errno;
        ::unlink(tempPath_.c_str());
        return fail(errnoCode(err), errText(err) + ": " + path_);
    }
    int err = 0;
    auto entry = statEntry(path_, nameOf(path_), err);
    protocol::WrittenFile written{path_, size_, {}};
    if (!err) written.entry = entry;
    finish(protocol::toJsonValue(written));
}

FileReadStream::FileReadStream(std::uint32_t id, FrameSink& sink,
                               const protocol::FileReadRequest& request)
    : StreamHandler(id, sink) {
    start(request);
}

void FileReadStream::start(const protocol::FileReadRequest& request) {
    UserEntry user;
    std::string error, path;
    if (!resolveUser(request.user, user, error)) return fail("bad_request", error);
    if (!absolutePath(request.path, path)) return fail("bad_request", "path must be absolute");
    AsUser as(user.uid, user.gid);
    fd_.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (!fd_) return fail(errnoCode(errno), errText(errno) + ": " + path);
    struct stat st {};
    ::fstat(fd_.get(), &st);
    if (S_ISDIR(st.st_mode)) return fail("conflict", "is a directory: " + path);
    if (!S_ISREG(st.st_mode)) return fail("bad_request", "not a regular file: " + path);
    // procfs and sysfs are not files to hand out: /proc/PID/environ holds
    // the secrets given to a command, unmasked (a symlink elsewhere that
    // leads there is caught too: this looks at what was opened).
    struct statfs fsInfo {};
    if (::fstatfs(fd_.get(), &fsInfo) == 0 &&
        (fsInfo.f_type == PROC_SUPER_MAGIC || fsInfo.f_type == SYSFS_MAGIC))
        return fail(errnoCode(EACCES), "files under /proc and /sys cannot be downloaded: " + path);
    size_ = static_cast<std::uint64_t>(st.st_size);
    sendControl(protocol::FileSize{size_});
}

void FileReadStream::tick(std::int64_t) {
    while (!done() && fd_) {
        std::size_t room = sendable();
        if (room == 0) return;
        // One buffer for the stream's life: no allocation and no zeroing
        // per frame (every byte touched in the guest is emulated).
        if (buf_.size() < room) buf_.resize(room);
        ssize_t n = ::read(fd_.get(), buf_.data(), room);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) return;
            return fail(errnoCode(errno), errText(errno));
        }
        if (n == 0) {
            fd_.reset();
            return finish(protocol::toJsonValue(protocol::FileSize{sent_}));
        }
        sent_ += static_cast<std::uint64_t>(n);
        sendData(1, std::string_view(buf_.data(), static_cast<std::size_t>(n)));
    }
}

}  // namespace airlock::guest

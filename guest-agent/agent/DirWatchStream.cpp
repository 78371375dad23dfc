#include "agent/DirWatchStream.hpp"

#include <dirent.h>
#include <linux/magic.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "agent/FileStreams.hpp"
#include "agent/GuestFs.hpp"
#include "protocol/JsonText.hpp"

namespace airlock::guest {
namespace {
using Kind = protocol::WatchRecord::Kind;
// FileWriteStream's file beside the target: "<target>.airlock-upload-<pid>-<stream>".
constexpr const char* kUploadMark = ".airlock-upload-";

constexpr std::uint32_t kMask = IN_CREATE | IN_MODIFY | IN_ATTRIB | IN_DELETE | IN_MOVED_FROM |
                                IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR |
                                IN_EXCL_UNLINK;

bool onNetworkMount(const std::string& path) {
    struct statfs fs{};
    if (::statfs(path.c_str(), &fs) != 0) return false;
    switch (static_cast<unsigned long>(fs.f_type)) {
        case NFS_SUPER_MAGIC:
        case SMB_SUPER_MAGIC:
        case 0xFF534D42UL:  // CIFS
        case 0xFE534D42UL:  // SMB2
        case 0x65735546UL:  // FUSE
            return true;
        default:
            return false;
    }
}
}  // namespace

DirWatchStream::DirWatchStream(std::uint32_t id, FrameSink& sink,
                               const protocol::DirWatchRequest& request)
    : StreamHandler(id, sink), recursive_(request.recursive) {
    ++live_;
    std::string error;
    if (!resolveUser(request.user, user_, error)) {
        fail("bad_request", error);
        return;
    }
    if (!absolutePath(request.path, root_)) {
        fail("bad_request", "path must be absolute");
        return;
    }
    AsUser as(user_.uid, user_.gid);
    struct stat st{};
    if (::stat(root_.c_str(), &st) != 0) {
        fail(errnoCode(errno), std::string(std::strerror(errno)) + ": " + root_);
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        fail("bad_request", "path " + root_ + " is not a directory");
        return;
    }
    if (!request.networkMounts && onNetworkMount(root_)) {
        fail("bad_request", "path " + root_ + " is on a network mount (allow network mounts to watch it)");
        return;
    }
    fd_.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    if (!fd_) {
        fail("io_error", std::string("inotify: ") + std::strerror(errno));
        return;
    }
    if (!watchTree("", false)) return;
    emit(Kind::started, "");
    flush();
}

bool DirWatchStream::watchTree(const std::string& top, bool report) {
    AsUser as(user_.uid, user_.gid);
    std::vector<std::string> todo{top};
    while (!todo.empty()) {
        std::string rel = std::move(todo.back());
        todo.pop_back();
        // Below the root, never through a symlink: one swapped in for a
        // directory would take the watch out of the tree.
        int wd = ::inotify_add_watch(fd_.get(), full(rel).c_str(),
                                     kMask | (rel.empty() ? 0u : std::uint32_t{IN_DONT_FOLLOW}));
        if (wd < 0) {
            int err = errno;
            if (rel.empty() || err == ENOSPC || err == ENOMEM) {
                // Out of the kernel's watches: a tree half watched would
                // miss changes without a word, so the watch ends saying why.
                fail(err == ENOSPC ? "resource_exhausted" : errnoCode(err),
                     std::string("inotify_add_watch: ") + std::strerror(err) + ": " +
                         (rel.empty() ? root_ : rel));
                return false;
            }
            continue;  // gone already, or not the user's to read: as envd, skipped
        }
        if (rel.empty()) rootWd_ = wd;
        // The same directory again (moved within the tree) keeps its watch
        // under its new name.
        dirs_[wd] = rel;
        if (dirs_.size() > kMaxWatches) {
            fail("resource_exhausted",
                 "more than " + std::to_string(kMaxWatches) + " directories to watch");
            return false;
        }
        if (!recursive_ && !report) continue;
        DIR* d = ::opendir(full(rel).c_str());
        if (!d) continue;
        while (dirent* e = ::readdir(d)) {
            std::string name = e->d_name;
            if (name == "." || name == "..") continue;
            std::string child = rel.empty() ? name : rel + "/" + name;
            if (report) emit(Kind::create, child);
            bool isDir = e->d_type == DT_DIR;
            if (e->d_type == DT_UNKNOWN) {
                struct stat st{};
                isDir = ::lstat(full(child).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
            }
            if (isDir && recursive_) todo.push_back(child);
        }
        ::closedir(d);
        if (done()) return false;
    }
    return true;
}

void DirWatchStream::unwatchTree(const std::string& top) {
    for (auto it = dirs_.begin(); it != dirs_.end();) {
        const std::string& rel = it->second;
        if (rel == top || rel.compare(0, top.size() + 1, top + "/") == 0) {
            ::inotify_rm_watch(fd_.get(), it->first);
            it = dirs_.erase(it);  // its IN_IGNORED finds nothing
        } else {
            ++it;
        }
    }
}

void DirWatchStream::emit(Kind kind, const std::string& rel) {
    if (done()) return;
    protocol::WatchRecord r;
    r.kind = kind;
    r.name = rel;
    if (kind == Kind::create || kind == Kind::write || kind == Kind::chmod) {
        AsUser as(user_.uid, user_.gid);
        int err = 0;
        auto entry = statEntry(full(rel), nameOf(full(rel)), err);
        if (err == 0) r.entry = std::move(entry);
    }
    std::string line = jsonText(protocol::toJsonValue(r));
    if (line.size() > protocol::kMaxWatchLine) {
        r.entry.reset();  // a name this long still goes, without its entry
        line = jsonText(protocol::toJsonValue(r));
        if (line.size() > protocol::kMaxWatchLine) return;
    }
    if (pending_.size() + line.size() + 1 > kMaxPending)
        return fail("resource_exhausted",
                    "the watch fell behind: more changes than its reader took");
    pending_ += line;
    pending_ += '\n';
}

void DirWatchStream::flush() {
    while (!pending_.empty() && !done()) {
        std::size_t room = sendable();
        if (room == 0) return;
        // Whole lines only: the host reads a record per line.
        std::size_t cut = pending_.size() <= room ? pending_.size() : pending_.rfind('\n', room - 1);
        if (cut == std::string::npos) return;  // the first line does not fit the window yet
        if (cut != pending_.size()) ++cut;
        sendData(0, std::string_view(pending_).substr(0, cut));
        pending_.erase(0, cut);
    }
}

void DirWatchStream::collectFds(PollSet& set) {
    // Nothing more is read while the host has not taken what waits: the
    // kernel's queue holds the rest (and says when it overflowed).
    if (fd_ && !done() && pending_.size() < kMaxPending / 2) set.add(fd_.get(), POLLIN, this);
}

void DirWatchStream::onFdReady(int, short) {
    readEvents();
    flush();
}

void DirWatchStream::tick(std::int64_t) { flush(); }

bool DirWatchStream::readyToProduce() const {
    // Only when the first whole line fits the window: else the loop would
    // spin, sending nothing, until the host returns some.
    return !pending_.empty() && sendable() >= pending_.find('\n') + 1;
}

void DirWatchStream::readEvents() {
    alignas(inotify_event) char buf[8 * 1024];
    // No more than the host can take soon: the rest waits in the kernel's queue.
    while (pending_.size() < kMaxPending / 2) {
        ssize_t n = ::read(fd_.get(), buf, sizeof buf);
        if (n <= 0) return;
        for (char* p = buf; p < buf + n && !done();) {
            auto* ev = reinterpret_cast<inotify_event*>(p);
            p += sizeof(inotify_event) + ev->len;
            if (ev->mask & IN_Q_OVERFLOW)
                return fail("resource_exhausted",
                            "the watch overflowed: changes came faster than they were read");
            if (ev->wd == rootWd_ && (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)))
                return fail("not_found", "the watched directory is gone: " + root_);
            auto dir = dirs_.find(ev->wd);
            if (dir == dirs_.end()) continue;
            if (ev->mask & IN_IGNORED) {
                dirs_.erase(dir);
                continue;
            }
            if (ev->len == 0) continue;
            std::string name(ev->name);
            std::string rel = dir->second.empty() ? name : dir->second + "/" + name;
            bool isDir = ev->mask & IN_ISDIR;
            // The files API writes beside the target and renames into place:
            // the watcher sees what envd's in-place write shows, a create and
            // a write of the target, and nothing of the file beside it.
            if (name.find(kUploadMark) != std::string::npos) {
                if (ev->mask & IN_MOVED_FROM) uploadCookie_ = ev->cookie;
                continue;
            }
            if ((ev->mask & IN_MOVED_TO) && uploadCookie_ && ev->cookie == *uploadCookie_) {
                uploadCookie_.reset();
                emit(Kind::create, rel);
                emit(Kind::write, rel);
                continue;
            }
            // envd's order for one event: create, rename, chmod, write, remove.
            if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
                emit(Kind::create, rel);
                if (isDir && recursive_ && !watchTree(rel, true)) return;
            }
            if (ev->mask & IN_MOVED_FROM) {
                emit(Kind::rename, rel);
                // Out of the tree, or to a new name in it (its MOVED_TO
                // watches it again there): either way not under this name.
                if (isDir) unwatchTree(rel);
            }
            if (ev->mask & IN_ATTRIB) emit(Kind::chmod, rel);
            if (ev->mask & IN_MODIFY) emit(Kind::write, rel);
            if (ev->mask & IN_DELETE) emit(Kind::remove, rel);
        }
    }
}

}  // namespace airlock::guest

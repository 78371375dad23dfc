#include "agent/FileActivity.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

namespace airlock::guest {
namespace {
constexpr std::size_t kReadBuffer = 64 * 1024;
constexpr int kMaxReadsPerWake = 16;  // then back to the loop: other streams wait otherwise

std::int64_t wallMs() {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// Trees whose every file is noise to a reviewer (a repository's internals,
// installed dependencies, caches) count as one path each: the directory.
std::string collapse(const std::string& rel) {
    static const char* const kBulkDirs[] = {".git", "node_modules", "__pycache__", ".venv",
                                            ".cache"};
    std::size_t start = 0;
    while (start < rel.size()) {
        std::size_t slash = rel.find('/', start);
        std::string part =
            rel.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
        for (const char* bulk : kBulkDirs)
            if (part == bulk && slash != std::string::npos) return rel.substr(0, slash + 1);
        if (slash == std::string::npos) break;
        start = slash + 1;
    }
    return rel;
}
// Mount points strictly below `root` (/proc/self/mounts; octal escapes as the
// kernel writes them).
std::vector<std::string> mountsBelow(const std::string& root) {
    std::vector<std::string> out;
    if (root == "/") return out;
    FILE* f = ::fopen("/proc/self/mounts", "re");
    if (!f) return out;
    char line[4096];
    while (::fgets(line, sizeof line, f) && out.size() < 64) {
        char* first = std::strchr(line, ' ');
        if (!first) continue;
        char* second = std::strchr(first + 1, ' ');
        if (!second) continue;
        std::string raw(first + 1, second), point;
        for (std::size_t i = 0; i < raw.size(); ++i) {
            if (raw[i] == '\\' && i + 3 < raw.size()) {
                point += static_cast<char>(std::strtol(raw.substr(i + 1, 3).c_str(), nullptr, 8));
                i += 3;
            } else {
                point += raw[i];
            }
        }
        if (point.size() > root.size() + 1 && point.compare(0, root.size(), root) == 0 &&
            point[root.size()] == '/')
            out.push_back(point);
    }
    ::fclose(f);
    return out;
}
}  // namespace

std::string FileActivity::watch(const std::string& root, bool forceInotify) {
    char resolved[PATH_MAX];
    if (!::realpath(root.c_str(), resolved))
        return "cannot resolve " + root + ": " + std::strerror(errno);
    struct stat st {};
    if (::stat(resolved, &st) != 0 || !S_ISDIR(st.st_mode)) return root + " is not a directory";
    fd_.reset();
    inotifyDirs_.clear();
    paths_.clear();
    dropped_ = 0;
    overflow_ = false;
    root_ = resolved;
    if (!forceInotify) {
        UniqueFd fan(::fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK,
                                     O_RDONLY | O_LARGEFILE | O_CLOEXEC));
        if (fan) {
            const std::uint64_t mask = FAN_ACCESS | FAN_MODIFY | FAN_CLOSE_WRITE;
            // The whole filesystem (every mount of it, bind mounts too), else
            // the mount; events outside the root are dropped when read.
            if (::fanotify_mark(fan.get(), FAN_MARK_ADD | FAN_MARK_FILESYSTEM, mask, AT_FDCWD,
                                resolved) == 0 ||
                ::fanotify_mark(fan.get(), FAN_MARK_ADD | FAN_MARK_MOUNT, mask, AT_FDCWD,
                                resolved) == 0) {
                // Filesystems mounted below the root (the sandbox's volumes)
                // are its files too.
                for (const auto& mountPoint : mountsBelow(root_))
                    ::fanotify_mark(fan.get(), FAN_MARK_ADD | FAN_MARK_FILESYSTEM, mask, AT_FDCWD,
                                    mountPoint.c_str());
                fd_ = std::move(fan);
                mechanism_ = "fanotify";
                return {};
            }
        }
    }
    UniqueFd in(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    if (!in) return std::string("neither fanotify nor inotify: ") + std::strerror(errno);
    fd_ = std::move(in);
    mechanism_ = "inotify";
    addInotifyTree(root_, false);
    return {};
}

void FileActivity::addInotifyTree(const std::string& dir, bool isNew) {
    if (inotifyDirs_.size() >= kMaxInotifyDirs) {
        overflow_ = true;
        return;
    }
    int wd = ::inotify_add_watch(
        fd_.get(), dir.c_str(),
        IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO | IN_ONLYDIR | IN_DONT_FOLLOW);
    if (wd < 0) return;
    inotifyDirs_[wd] = dir;
    DIR* d = ::opendir(dir.c_str());
    if (!d) return;
    while (dirent* e = ::readdir(d)) {
        std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        std::string child = dir + "/" + name;
        // Bulk trees are watched at their top only (collapse() folds them anyway).
        std::string rel = child.substr(root_.size() + 1);
        if (collapse(rel + "/x") != rel + "/x") continue;
        struct stat st {};
        if (::lstat(child.c_str(), &st) != 0) continue;
        if (S_ISDIR(st.st_mode))
            addInotifyTree(child, isNew);
        else if (isNew && S_ISREG(st.st_mode))
            record(child, false, true, {});  // written before its new directory was watched
    }
    ::closedir(d);
}

void FileActivity::onReadable(const TraceOf& traceOf) {
    if (!fd_) return;
    if (mechanism_ == "fanotify")
        readFanotify(traceOf);
    else
        readInotify();
}

void FileActivity::readFanotify(const TraceOf& traceOf) {
    std::vector<char> buf(kReadBuffer);
    const pid_t self = ::getpid();
    for (int round = 0; round < kMaxReadsPerWake; ++round) {
        ssize_t n = ::read(fd_.get(), buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        auto* meta = reinterpret_cast<fanotify_event_metadata*>(buf.data());
        ssize_t left = n;
        for (; FAN_EVENT_OK(meta, left); meta = FAN_EVENT_NEXT(meta, left)) {
            if (meta->vers != FANOTIFY_METADATA_VERSION) return;
            if (meta->mask & FAN_Q_OVERFLOW) overflow_ = true;
            if (meta->fd < 0) continue;
            UniqueFd file(meta->fd);
            if (meta->pid == self) continue;  // the agent's own work: the host records it
            char link[PATH_MAX];
            std::string proc = "/proc/self/fd/" + std::to_string(meta->fd);
            ssize_t len = ::readlink(proc.c_str(), link, sizeof link - 1);
            if (len <= 0) continue;
            std::string path(link, static_cast<std::size_t>(len));
            const std::string deleted = " (deleted)";
            if (path.size() > deleted.size() &&
                path.compare(path.size() - deleted.size(), deleted.size(), deleted) == 0)
                path.resize(path.size() - deleted.size());
            bool write = meta->mask & (FAN_MODIFY | FAN_CLOSE_WRITE);
            bool read = meta->mask & FAN_ACCESS;
            if (!read && !write) continue;
            if (path.compare(0, root_.size(), root_) != 0 || path.size() <= root_.size() + 1 ||
                path[root_.size()] != '/')
                continue;
            // FAN_CLOSE_WRITE after writes adds nothing; alone (a truncating open) it is a write.
            if ((meta->mask & FAN_CLOSE_WRITE) && !(meta->mask & FAN_MODIFY)) {
                auto it = paths_.find(collapse(path.substr(root_.size() + 1)));
                if (it != paths_.end() && it->second.writes > 0) continue;
            }
            record(path, read, write, traceOf ? traceOf(meta->pid) : std::string());
        }
    }
}

void FileActivity::readInotify() {
    alignas(inotify_event) char buf[kReadBuffer];
    for (int round = 0; round < kMaxReadsPerWake; ++round) {
        ssize_t n = ::read(fd_.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        for (ssize_t off = 0; off + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
            auto* e = reinterpret_cast<inotify_event*>(buf + off);
            off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
            if (e->mask & IN_Q_OVERFLOW) overflow_ = true;
            auto dir = inotifyDirs_.find(e->wd);
            if (dir == inotifyDirs_.end() || e->len == 0) continue;
            std::string path = dir->second + "/" + e->name;
            if (e->mask & IN_ISDIR) {
                if (e->mask & (IN_CREATE | IN_MOVED_TO)) {
                    std::string rel = path.substr(root_.size() + 1);
                    if (collapse(rel + "/x") == rel + "/x") addInotifyTree(path, true);
                }
                continue;
            }
            if (e->mask & (IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO))
                record(path, false, true, {});
        }
    }
}

void FileActivity::record(const std::string& absPath, bool read, bool write,
                          const std::string& trace) {
    std::string rel = collapse(absPath.substr(root_.size() + 1));
    auto it = paths_.find(rel);
    if (it == paths_.end()) {
        // A path the host would not take (longer than Linux's) is counted, not sent.
        if (paths_.size() >= kMaxPaths || rel.empty() || rel.size() > protocol::kMaxGuestPath) {
            ++dropped_;
            return;
        }
        it = paths_.emplace(rel, PathStats{}).first;
    }
    PathStats& s = it->second;
    std::int64_t now = wallMs();
    if (s.firstMs == 0) s.firstMs = now;
    s.lastMs = now;
    if (read) ++s.reads;
    if (write) {
        ++s.writes;
        if (s.firstWriteMs == 0) s.firstWriteMs = now;
        s.lastWriteMs = now;
        s.lastWriteTrace = trace;
    }
    if (!trace.empty() && s.traces.size() < kMaxTracesPerPath) s.traces.insert(trace);
}

protocol::FileActivityReport FileActivity::drain() {
    // The guest's "now" goes beside the times: the host shifts them onto its
    // own clock (a restored guest's may lag).
    protocol::FileActivityReport out;
    out.watching = watching();
    out.root = root_;
    out.mechanism = mechanism_;
    out.nowMs = wallMs();
    out.dropped = dropped_;
    out.overflow = overflow_;
    out.paths.reserve(paths_.size());
    for (const auto& [path, s] : paths_)
        out.paths.push_back(protocol::PathActivity{path,
                                                   s.reads,
                                                   s.writes,
                                                   s.firstMs,
                                                   s.lastMs,
                                                   s.firstWriteMs,
                                                   s.lastWriteMs,
                                                   {s.traces.begin(), s.traces.end()},
                                                   s.lastWriteTrace});
    paths_.clear();
    dropped_ = 0;
    overflow_ = false;
    return out;
}

}  // namespace airlock::guest

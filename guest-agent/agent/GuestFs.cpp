#include "agent/GuestFs.hpp"

#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <climits>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

namespace airlock::guest {

AsUser::AsUser(uid_t uid, gid_t gid) {
    oldGid_ = static_cast<gid_t>(::setfsgid(gid));
    oldUid_ = static_cast<uid_t>(::setfsuid(uid));
}

AsUser::~AsUser() {
    ::setfsuid(oldUid_);
    ::setfsgid(oldGid_);
}

std::string errnoCode(int err) {
    switch (err) {
        case ENOENT: return "not_found";
        case EEXIST:
        case ENOTEMPTY:
        case EISDIR:
        case ENOTDIR:
        case EBUSY:
        case EXDEV: return "conflict";
        case EACCES:
        case EPERM:
        case EROFS: return "permission_denied";
        case EINVAL:
        case ENAMETOOLONG:
        case ELOOP: return "bad_request";
        case ENOSPC:
        case EDQUOT: return "no_space";
        default: return "io_error";
    }
}

int makeDirs(const std::string& path, mode_t mode, uid_t uid, gid_t gid) {
    std::string cur;
    std::size_t i = 1;
    while (i <= path.size()) {
        std::size_t j = path.find('/', i);
        if (j == std::string::npos) j = path.size();
        cur = path.substr(0, j);
        if (!cur.empty()) {
            if (::mkdir(cur.c_str(), mode) == 0) {
                // (-1, -1): unchanged; never through a link swapped in meanwhile.
                if (::fchownat(AT_FDCWD, cur.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0)
                    return errno;
            } else if (errno != EEXIST) {
                return errno;
            }
        }
        i = j + 1;
    }
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

std::string nameOf(const std::string& path) {
    return path == "/" ? "/" : path.substr(path.rfind('/') + 1);
}

std::string utcTime(std::time_t t) {
    // Four-digit years only (the host reads nothing else): a time past them
    // shows the nearest end instead of failing a listing.
    std::tm tm{};
    bool dated = gmtime_r(&t, &tm) != nullptr;
    long year = dated ? tm.tm_year + 1900L : (t < 0 ? -1 : 10000);
    if (year < 0) return "0000-01-01T00:00:00Z";
    if (year > 9999) return "9999-12-31T23:59:59Z";
    char out[64];
    std::snprintf(out, sizeof out, "%04ld-%02d-%02dT%02d:%02d:%02dZ", year, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec);
    return out;
}

protocol::FileMetadata readFileMetadata(const std::string& path) {
    protocol::FileMetadata out;
    // What any tool in the guest may have set (setfattr): only printable
    // pairs that fit the set's bound are read back, the rest left out.
    std::vector<char> names(4096);
    ssize_t n = ::llistxattr(path.c_str(), names.data(), names.size());
    if (n < 0 && errno == ERANGE) {
        names.resize(65536);  // the kernel's bound for a list
        n = ::llistxattr(path.c_str(), names.data(), names.size());
    }
    if (n <= 0) return out;
    const std::size_t prefix = std::strlen(protocol::kFileMetadataXattrPrefix);
    std::size_t used = 0;
    for (std::size_t at = 0; at < static_cast<std::size_t>(n);) {
        std::string attr(names.data() + at);
        at += attr.size() + 1;
        if (attr.compare(0, prefix, protocol::kFileMetadataXattrPrefix) != 0) continue;
        char value[protocol::kMaxFileMetadataBytes + 1];
        ssize_t v = ::lgetxattr(path.c_str(), attr.c_str(), value, sizeof value);
        if (v < 0) continue;  // gone meanwhile, or over the bound (ERANGE)
        std::string key = attr.substr(prefix);
        std::string text(value, static_cast<std::size_t>(v));
        protocol::FileMetadata one{{key, text}};
        std::size_t cost = protocol::fileMetadataCost(key, text);
        if (!protocol::fileMetadataProblem(one).empty() ||
            used + cost > protocol::kMaxFileMetadataBytes)
            continue;
        used += cost;
        out.emplace(std::move(key), std::move(text));
    }
    return out;
}

int writeFileMetadata(int fd, const protocol::FileMetadata& metadata) {
    for (const auto& [key, value] : metadata) {
        std::string attr = protocol::kFileMetadataXattrPrefix + key;
        if (::fsetxattr(fd, attr.c_str(), value.data(), value.size(), 0) != 0) {
            // A filesystem without user attributes keeps none, as envd's
            // does; the file's entry then shows none.
            if (errno == ENOTSUP || errno == EOPNOTSUPP) return 0;
            return errno;
        }
    }
    return 0;
}

protocol::FileEntry statEntry(const std::string& path, const std::string& name, int& err) {
    using Type = protocol::FileEntry::Type;
    struct stat st{};
    if (::lstat(path.c_str(), &st) != 0) {
        err = errno;
        return {};
    }
    err = 0;
    Type type = S_ISREG(st.st_mode) ? Type::file : S_ISDIR(st.st_mode) ? Type::directory : S_ISLNK(st.st_mode) ? Type::symlink : Type::other;
    auto modeText = [](mode_t m) {
        char out[8];
        std::snprintf(out, sizeof out, "%04o", m & 07777);
        return std::string(out);
    };
    protocol::FileEntry entry{name, path, type, static_cast<std::uint64_t>(st.st_size),
                              modeText(st.st_mode), utcTime(st.st_mtime), st.st_uid, st.st_gid};
    if (type == Type::symlink) {
        // Every link on the way resolved; one that leads nowhere has no target.
        char resolved[PATH_MAX];
        struct stat target{};
        if (::realpath(path.c_str(), resolved) && ::stat(resolved, &target) == 0) {
            entry.target = resolved;
            entry.targetType = S_ISREG(target.st_mode)   ? Type::file
                               : S_ISDIR(target.st_mode) ? Type::directory
                                                         : Type::other;
            entry.targetMode = modeText(target.st_mode);
        }
    }
    entry.metadata = readFileMetadata(path);
    return entry;
}

}  // namespace airlock::guest

#pragma once
#include <sys/types.h>

#include <ctime>
#include <optional>
#include <string>

#include "protocol/GuestPath.hpp"
#include "protocol/GuestResults.hpp"

namespace airlock::guest {

// Client paths are resolved here, inside the guest, never on the host
// (protocol/GuestPath: the host judges a write scope by the same rule).
using protocol::normalizeGuestPath;

// Runs file operations with a user's file-system identity (setfsuid and
// setfsgid: the agent is single-threaded), restored on scope exit.
class AsUser {
public:
    explicit AsUser(uid_t uid, gid_t gid);
    ~AsUser();
    AsUser(const AsUser&) = delete;
    AsUser& operator=(const AsUser&) = delete;

private:
    uid_t oldUid_;
    gid_t oldGid_;
};

// errno -> protocol error code the host maps to HTTP: not_found (404),
// conflict (409), permission_denied (403), bad_request (400), io_error (500).
std::string errnoCode(int err);

// mkdir -p; returns 0 or an errno. The directories it makes are given to
// uid:gid when those are set.
int makeDirs(const std::string& path, mode_t mode, uid_t uid = static_cast<uid_t>(-1),
             gid_t gid = static_cast<gid_t>(-1));

// "%Y-%m-%dT%H:%M:%SZ" with four digits of year, clamped to 0000..9999.
std::string utcTime(std::time_t t);

// A normalized absolute path's last component ("/" for the root).
std::string nameOf(const std::string& path);

// One path as lstat sees it; err: 0 or the errno.
protocol::FileEntry statEntry(const std::string& path, const std::string& name, int& err);
// A path's user metadata ("user.e2b.*" attributes, not followed through a
// symlink): the valid pairs that fit the set's bound.
protocol::FileMetadata readFileMetadata(const std::string& path);
// Sets each pair on an open file; 0, or the errno that refused one (a
// filesystem without user attributes refuses none: it keeps none).
int writeFileMetadata(int fd, const protocol::FileMetadata& metadata);

}  // namespace airlock::guest

#pragma once
#include <sys/types.h>

#include <optional>
#include <string>

namespace airlock::guest {

struct UserEntry {
    std::string name;
    uid_t uid = 0;
    gid_t gid = 0;
    std::string home;
    std::string shell;
};

// Reads /etc/passwd directly: a static binary cannot use NSS.
std::optional<UserEntry> lookupUser(const std::string& name, const std::string& passwdPath = "/etc/passwd");

}  // namespace airlock::guest

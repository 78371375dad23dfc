#include "agent/UserDb.hpp"

#include <fstream>
#include <sstream>
#include <vector>

namespace airlock::guest {

std::optional<UserEntry> lookupUser(const std::string& name, const std::string& passwdPath) {
    std::ifstream in(passwdPath);
    std::string line;
    while (std::getline(in, line)) {
        std::vector<std::string> fields;
        std::stringstream ss(line);
        std::string f;
        while (std::getline(ss, f, ':')) fields.push_back(f);
        if (fields.size() < 7 || fields[0] != name) continue;
        try {
            return UserEntry{fields[0], static_cast<uid_t>(std::stoul(fields[2])),
                             static_cast<gid_t>(std::stoul(fields[3])), fields[5], fields[6]};
        } catch (...) {
            return std::nullopt;
        }
    }
    return std::nullopt;
}

}  // namespace airlock::guest

#pragma once
#include <cstdint>
#include <string>

namespace airlock {

// What VolumeImage reports of a file inside a volume. `type` is "file",
// "dir", "symlink" or "other"; `mode` holds the permission bits alone
// (07777), the type being in `type`.
struct VolumeEntry {
    std::string name;
    std::string type;
    std::uint64_t size = 0;  // 0 for directories in a listing
    unsigned mode = 0;
    unsigned uid = 0, gid = 0;
};

struct VolumeStat {
    std::string type;
    std::uint64_t size = 0;
    unsigned mode = 0;
    unsigned uid = 0, gid = 0;
};

}  // namespace airlock

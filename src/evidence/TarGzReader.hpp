#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace airlock {

// Reads a .tar.gz someone else may have made or changed, within limits:
// regular files and directories only (a link, device or fifo is refused),
// relative paths without "..", no path twice, at most maxBytes unpacked and
// maxEntries entries. pax "path" and "size" records and GNU long names are
// honoured (Python's tarfile and GNU tar write them); anything else is
// refused with a reason.
class TarGzReader {
  public:
    struct Limits {
        std::uint64_t maxBytes = 2ull << 30;
        std::size_t maxEntries = 100000;
    };
    // path -> content of every regular file; throws Error(bad_request).
    static std::map<std::string, std::string> read(std::string_view gz, Limits limits);
    static std::map<std::string, std::string> read(std::string_view gz) {
        return read(gz, Limits{});
    }
};

// gunzip with a cap on the output; throws Error(bad_request).
std::string gunzipBytes(std::string_view gz, std::uint64_t maxBytes);

}  // namespace airlock

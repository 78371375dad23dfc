#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "volumes/VolumeEntry.hpp"

namespace airlock {

// One inode as debugfs `stat` prints it.
struct DebugfsInode {
    std::uint32_t ino = 0;
    VolumeStat stat;
};

// The commands of one debugfs run (`debugfs -f -`, fed on stdin) and the
// reading of what they print. Before each command goes a comment line with a
// nonce, which debugfs copies to stdout as it is: what an image holds (a
// link's target, a file name) can print any line, but not the nonce, so no
// image can make one command's output pass for another's.
class DebugfsScript {
  public:
    DebugfsScript();
    // Appends a command; returns the index of its output in split().
    std::size_t add(const std::string& command);
    const std::string& text() const { return text_; }
    std::size_t size() const { return count_; }
    // Each command's stdout (without debugfs's echo of the command), by
    // index; "" for a command whose output never came.
    std::vector<std::string> split(const std::string& output) const;

    // "path" for debugfs's parser; only for what normalizePath accepted (no
    // quote, backslash or control character) or a name this code chose.
    static std::string quote(const std::string& path);
    // What `stat` printed of one inode; nullopt when it printed none (its
    // error went to stderr). Only the fixed first lines are read: the rest
    // (a link's target, extended attributes) is the image's to write.
    static std::optional<DebugfsInode> parseStat(const std::string& output);
    // `ls -p` output, without "." and "..". A line that no file name could
    // have printed (a name holding '/' or a line break) is left out.
    static std::vector<VolumeEntry> parseListing(const std::string& output);
    // Whether `feature` listed `name` among the filesystem's features.
    static bool hasFeature(const std::string& output, const std::string& name);
    // stderr's messages, one a line, without debugfs's version banner:
    // empty when it reported no error.
    static std::vector<std::string> errorLines(const std::string& errors);

  private:
    std::string marker(std::size_t index) const;

    std::string nonce_, text_;
    std::size_t count_ = 0;
};

}  // namespace airlock

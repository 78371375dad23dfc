#include "volumes/DebugfsScript.hpp"

#include <sys/stat.h>

#include <charconv>
#include <string_view>

#include "core/Ids.hpp"

namespace airlock {
namespace {

std::vector<std::string_view> debugfsLines(std::string_view text) {
    std::vector<std::string_view> lines;
    while (!text.empty()) {
        auto end = text.find('\n');
        lines.push_back(text.substr(0, end));
        if (end == std::string_view::npos) break;
        text.remove_prefix(end + 1);
    }
    return lines;
}

std::string_view trimSpaces(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}

// A whole decimal (or octal) number, nothing else.
template <typename T>
std::optional<T> wholeNumber(std::string_view s, int base = 10) {
    T value{};
    if (s.empty()) return std::nullopt;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, base);
    if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return value;
}

// debugfs prints owners with %d: an id over 2^31 comes out negative.
std::optional<unsigned> ownerId(std::string_view s) {
    auto v = wholeNumber<long long>(trimSpaces(s));
    if (!v || *v < -2147483648LL || *v > 4294967295LL) return std::nullopt;
    return static_cast<unsigned>(static_cast<std::uint32_t>(*v));
}

// The number right after `label` on `line`, up to the next space.
std::string_view fieldAfter(std::string_view line, std::string_view label) {
    auto at = line.find(label);
    if (at == std::string_view::npos) return {};
    auto rest = trimSpaces(line.substr(at + label.size()));
    return rest.substr(0, rest.find(' '));
}

std::string typeOfMode(unsigned mode) {
    switch (mode & S_IFMT) {
        case S_IFREG:
            return "file";
        case S_IFDIR:
            return "dir";
        case S_IFLNK:
            return "symlink";
        default:
            return "other";
    }
}

std::string typeOfStatName(std::string_view name) {
    if (name == "regular") return "file";
    if (name == "directory") return "dir";
    if (name == "symlink") return "symlink";
    return "other";
}

}  // namespace

DebugfsScript::DebugfsScript() : nonce_(newId("airlock-")) {}

std::string DebugfsScript::marker(std::size_t index) const {
    return "# " + nonce_ + " " + std::to_string(index);
}

std::size_t DebugfsScript::add(const std::string& command) {
    text_ += marker(count_) + "\n" + command + "\n";
    return count_++;
}

std::vector<std::string> DebugfsScript::split(const std::string& output) const {
    std::vector<std::string> parts(count_);
    std::size_t next = 0;
    std::string* current = nullptr;
    bool echo = false;
    const std::string prefix = "# " + nonce_ + " ";
    for (auto line : debugfsLines(output)) {
        // Markers come in order; a command's output may be missing.
        if (line.size() > prefix.size() && line.substr(0, prefix.size()) == prefix) {
            auto k = wholeNumber<std::size_t>(line.substr(prefix.size()));
            if (k && *k >= next && *k < count_) {
                current = &parts[*k];
                next = *k + 1;
                echo = true;
                continue;
            }
        }
        if (!current) continue;
        if (echo && line.substr(0, 9) == "debugfs: ") {
            echo = false;
            continue;
        }
        echo = false;
        *current += line;
        *current += '\n';
    }
    return parts;
}

std::string DebugfsScript::quote(const std::string& path) { return "\"" + path + "\""; }

std::optional<DebugfsInode> DebugfsScript::parseStat(const std::string& output) {
    auto lines = debugfsLines(output);
    // "Inode: 14   Type: regular    Mode:  0644   Flags: 0x80000", then
    // "Generation: ...", then "User:     0   Group:     0   [Project: 0]   Size: 6".
    std::size_t first = 0;
    while (first < lines.size() && trimSpaces(lines[first]).empty()) ++first;
    if (first >= lines.size() || lines[first].substr(0, 7) != "Inode: ") return std::nullopt;
    std::string_view head = lines[first];
    DebugfsInode inode;
    auto ino = wholeNumber<std::uint32_t>(fieldAfter(head, "Inode: "));
    auto typeAt = head.find("Type: "), modeAt = head.find("Mode: ");
    if (!ino || typeAt == std::string_view::npos || modeAt == std::string_view::npos ||
        modeAt < typeAt)
        return std::nullopt;
    auto mode = wholeNumber<unsigned>(fieldAfter(head, "Mode: "), 8);
    if (!mode) return std::nullopt;
    inode.ino = *ino;
    inode.stat.type = typeOfStatName(trimSpaces(head.substr(typeAt + 6, modeAt - typeAt - 6)));
    inode.stat.mode = *mode & 07777;
    for (std::size_t i = first + 1; i < lines.size() && i <= first + 3; ++i) {
        std::string_view line = lines[i];
        if (line.substr(0, 5) != "User:") continue;
        auto uid = ownerId(fieldAfter(line, "User:"));
        auto gid = ownerId(fieldAfter(line, "Group:"));
        auto sizeAt = line.rfind("Size: ");
        if (!uid || !gid || sizeAt == std::string_view::npos) return std::nullopt;
        auto size = wholeNumber<std::uint64_t>(trimSpaces(line.substr(sizeAt + 6)));
        if (!size) return std::nullopt;
        inode.stat.uid = *uid;
        inode.stat.gid = *gid;
        inode.stat.size = *size;
        return inode;
    }
    return std::nullopt;
}

std::vector<VolumeEntry> DebugfsScript::parseListing(const std::string& output) {
    // "/ino/mode/uid/gid/name/size/", or "/ino/mode/uid/gid/name//" for a directory.
    std::vector<VolumeEntry> entries;
    for (auto line : debugfsLines(output)) {
        if (line.size() < 2 || line.front() != '/' || line.back() != '/') continue;
        std::string_view rest = line.substr(1, line.size() - 2);
        std::string_view fields[4];
        bool whole = true;
        for (auto& field : fields) {
            auto slash = rest.find('/');
            if (slash == std::string_view::npos) {
                whole = false;
                break;
            }
            field = rest.substr(0, slash);
            rest.remove_prefix(slash + 1);
        }
        auto lastSlash = rest.rfind('/');
        if (!whole || lastSlash == std::string_view::npos) continue;
        std::string_view name = rest.substr(0, lastSlash), size = rest.substr(lastSlash + 1);
        auto mode = wholeNumber<unsigned>(fields[1], 8);
        auto uid = ownerId(fields[2]);
        auto gid = ownerId(fields[3]);
        if (!wholeNumber<std::uint32_t>(fields[0]) || !mode || !uid || !gid) continue;
        if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos)
            continue;
        VolumeEntry entry;
        entry.name = std::string(name);
        entry.type = typeOfMode(*mode);
        entry.mode = *mode & 07777;
        entry.uid = *uid;
        entry.gid = *gid;
        if (!size.empty()) {
            auto bytes = wholeNumber<std::uint64_t>(size);
            if (!bytes) continue;
            entry.size = *bytes;
        }
        entries.push_back(std::move(entry));
    }
    return entries;
}

bool DebugfsScript::hasFeature(const std::string& output, const std::string& name) {
    for (auto line : debugfsLines(output)) {
        constexpr std::string_view label = "Filesystem features:";
        if (line.substr(0, label.size()) != label) continue;
        std::string_view rest = line.substr(label.size());
        while (!rest.empty()) {
            rest = trimSpaces(rest);
            auto word = rest.substr(0, rest.find(' '));
            if (word == name) return true;
            rest.remove_prefix(word.size());
        }
    }
    return false;
}

std::vector<std::string> DebugfsScript::errorLines(const std::string& errors) {
    std::vector<std::string> messages;
    for (auto line : debugfsLines(errors)) {
        line = trimSpaces(line);
        if (line.empty()) continue;
        // "debugfs 1.47.0 (5-Feb-2023)"
        if (line.substr(0, 8) == "debugfs " && line.size() > 8 && line[8] >= '0' && line[8] <= '9')
            continue;
        messages.emplace_back(line);
    }
    return messages;
}

}  // namespace airlock

#include "volumes/VolumeImage.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/Error.hpp"
#include "core/Log.hpp"
#include "volumes/DebugfsScript.hpp"

namespace airlock {

struct VolumeImage::Lookup {
    std::vector<std::string> components;  // of the normalized path
    std::vector<std::string> prefixes;    // "/a", "/a/b", ...: one per component
    // The root, then each component that exists, in order: it stops at the
    // first one missing and after the first that is not a directory.
    std::vector<DebugfsInode> inodes;
    std::vector<std::string> extra;  // what the extra commands printed

    bool found() const { return inodes.size() == components.size() + 1; }
    const VolumeStat& last() const { return inodes.back().stat; }
};

namespace {

constexpr std::size_t kVolumeScriptOutput = std::size_t(32) << 20;
constexpr std::size_t kVolumeToolOutput = 64 * 1024;

// A tool's messages for an Error: they may quote names from the image, so
// bounded and without control characters.
std::string printableVolumeText(std::string text) {
    if (text.size() > 1000) text.resize(1000);
    for (auto& c : text)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
    return text;
}

std::string joinVolumeErrors(const std::vector<std::string>& errors) {
    std::string text;
    for (std::size_t i = 0; i < errors.size() && i < 5; ++i) text += (i ? "; " : "") + errors[i];
    return text.empty() ? "no message" : printableVolumeText(text);
}

std::string toolMessages(const ToolResult& r) { return printableVolumeText(r.output + r.errors); }

[[noreturn]] void failVolumeChange(const std::vector<std::string>& errors,
                                   const std::string& what) {
    for (const auto& e : errors)
        if (e.find("Could not allocate") != std::string::npos ||
            e.find("No free space") != std::string::npos)
            throw Error(ErrorCode::insufficient_storage, "the volume is full: cannot " + what);
    throw Error(ErrorCode::internal,
                "cannot " + what + " in the volume: " + joinVolumeErrors(errors));
}

std::uint64_t volumeFileSize(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        throw Error(ErrorCode::internal, std::string("fstat: ") + std::strerror(errno));
    return static_cast<std::uint64_t>(st.st_size);
}

std::string volumeOctal(unsigned value) {
    char text[16];
    std::snprintf(text, sizeof text, "0%o", value);
    return text;
}

std::string inodeSpec(const DebugfsInode& inode) { return "<" + std::to_string(inode.ino) + ">"; }

// Owner and mode of what `path` names now (the path holds no link: it was
// checked, or made by this very script).
void ownVolumePath(DebugfsScript& script, const std::string& path, unsigned uid, unsigned gid,
                   unsigned mode) {
    script.add("sif " + DebugfsScript::quote(path) + " uid " + std::to_string(uid));
    script.add("sif " + DebugfsScript::quote(path) + " gid " + std::to_string(gid));
    script.add("sif " + DebugfsScript::quote(path) + " mode " + volumeOctal(mode));
}

}  // namespace

VolumeImage::VolumeImage(std::string imagePath, ToolUser user, std::chrono::milliseconds timeout)
    : imagePath_(std::move(imagePath)), runner_(user, timeout) {}

std::string VolumeImage::normalizePath(const std::string& path) {
    auto refuse = [](const std::string& why) {
        throw Error(ErrorCode::bad_request, "volume path " + why);
    };
    if (path.size() > 4096) refuse("is longer than 4096 bytes");
    if (path.empty() || path[0] != '/') refuse("must be absolute (start with /)");
    for (unsigned char c : path) {
        if (c == 0) refuse("holds a NUL byte");
        if (c < 0x20 || c == 0x7f) refuse("holds a control character");
        if (c == '"') refuse("holds a double quote, which volume paths may not");
        if (c == '\\') refuse("holds a backslash, which volume paths may not");
    }
    std::string normalized;
    std::size_t at = 0;
    while (at < path.size()) {
        std::size_t end = std::min(path.find('/', at), path.size());
        std::string_view component(path.data() + at, end - at);
        at = end + 1;
        if (component.empty() || component == ".") continue;
        if (component == "..") refuse("may not hold \"..\": " + path);
        if (component.size() > 255) refuse("has a component over 255 bytes");
        normalized += '/';
        normalized += component;
    }
    return normalized.empty() ? "/" : normalized;
}

UniqueFd VolumeImage::openImage(bool writable) const {
    // O_NONBLOCK: a FIFO swapped in for the image must not hang the open.
    UniqueFd fd(::open(imagePath_.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW |
                                               O_NOCTTY | O_NONBLOCK));
    if (!fd) {
        if (errno == ENOENT) throw Error(ErrorCode::not_found, "no volume image at " + imagePath_);
        if (errno == ELOOP)
            throw Error(ErrorCode::bad_request,
                        "the volume image is a symbolic link: " + imagePath_);
        throw Error(ErrorCode::internal,
                    "cannot open the volume image " + imagePath_ + ": " + std::strerror(errno));
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
        throw Error(ErrorCode::bad_request,
                    "the volume image is not a regular file: " + imagePath_);
    return fd;
}

ToolResult VolumeImage::runScript(const DebugfsScript& script, bool writable, int hostFd) {
    UniqueFd image = openImage(writable);
    ToolCommand command;
    command.argv = {ToolRunner::locate("debugfs"), writable ? "-w" : "-c", "-f", "-", "/dev/fd/3"};
    command.input = script.text();
    command.fds = {image.get()};
    if (hostFd >= 0) command.fds.push_back(hostFd);
    // Reads write no file at all; changes stay within the image's size.
    command.maxFileBytes = writable ? volumeFileSize(image.get()) : 0;
    command.maxOutputBytes = kVolumeScriptOutput;
    ToolResult result = runner_.run(command);
    if (result.stopped)
        throw Error(ErrorCode::payload_too_large,
                    "debugfs printed more than 32 MiB about the volume");
    if (result.signal != 0)
        throw Error(ErrorCode::internal, "debugfs was killed by signal " +
                                             std::to_string(result.signal) +
                                             " reading the volume " + imagePath_);
    return result;
}

ToolResult VolumeImage::runTool(const std::string& tool, std::vector<std::string> args,
                                bool writable) {
    UniqueFd image = openImage(writable);
    ToolCommand command;
    command.argv.push_back(ToolRunner::locate(tool));
    for (auto& a : args) command.argv.push_back(std::move(a));
    command.argv.push_back("/dev/fd/3");
    command.fds = {image.get()};
    command.maxFileBytes = writable ? volumeFileSize(image.get()) : 0;
    // The first messages are kept, the rest drained: stopping e2fsck midway
    // through a repair would leave the filesystem worse.
    std::string kept;
    command.onOutput = [&kept](std::string_view chunk) {
        kept.append(chunk.substr(0, kVolumeToolOutput - std::min(kVolumeToolOutput, kept.size())));
        return true;
    };
    ToolResult result = runner_.run(command);
    result.output = std::move(kept);
    return result;
}

VolumeImage::Lookup VolumeImage::lookup(const std::string& path,
                                        const std::vector<std::string>& extraCommands,
                                        bool lastMayBeLink) {
    Lookup found;
    for (std::size_t at = 1; at < path.size();) {
        std::size_t end = std::min(path.find('/', at), path.size());
        found.components.push_back(path.substr(at, end - at));
        found.prefixes.push_back(path.substr(0, end));
        at = end + 1;
    }
    // Each prefix on its own: debugfs would follow a link on the way.
    DebugfsScript script;
    script.add("stat " + DebugfsScript::quote("/"));
    for (const auto& prefix : found.prefixes) script.add("stat " + DebugfsScript::quote(prefix));
    std::vector<std::size_t> extraAt;
    for (const auto& command : extraCommands) extraAt.push_back(script.add(command));
    ToolResult result = runScript(script, false);
    auto outputs = script.split(result.output);
    auto errors = DebugfsScript::errorLines(result.errors);

    auto root = DebugfsScript::parseStat(outputs[0]);
    if (!root || root->stat.type != "dir")
        throw Error(ErrorCode::internal,
                    "cannot read the volume image " + imagePath_ + ": " + joinVolumeErrors(errors));
    found.inodes.push_back(*root);
    for (std::size_t i = 0; i < found.prefixes.size(); ++i) {
        if (found.inodes.back().stat.type != "dir") break;  // nothing lies below a file
        const std::string& prefix = found.prefixes[i];
        auto inode = DebugfsScript::parseStat(outputs[i + 1]);
        if (!inode) {
            // Missing only when debugfs said so of this very path.
            std::string missing = prefix + ": File not found by ext2_lookup";
            if (std::find(errors.begin(), errors.end(), missing) == errors.end())
                throw Error(ErrorCode::internal, "cannot look up " + prefix +
                                                     " in the volume: " + joinVolumeErrors(errors));
            break;
        }
        if (inode->stat.type == "symlink" && !(lastMayBeLink && i + 1 == found.prefixes.size()))
            throw Error(
                ErrorCode::bad_request,
                prefix + " in the volume is a symbolic link; links in volumes are never followed");
        found.inodes.push_back(*inode);
    }
    for (std::size_t at : extraAt) found.extra.push_back(outputs[at]);
    return found;
}

VolumeImage::Lookup VolumeImage::lookupForChange(const std::string& path, bool lastMayBeLink) {
    // debugfs writes past the journal: what it holds goes in first.
    Lookup found = lookup(path, {"feature"}, lastMayBeLink);
    if (!DebugfsScript::hasFeature(found.extra[0], "needs_recovery")) return found;
    recoverJournal();
    return lookup(path, {}, lastMayBeLink);
}

bool VolumeImage::needsRecovery() {
    DebugfsScript script;
    std::size_t at = script.add("feature");
    ToolResult result = runScript(script, false);
    std::string features = script.split(result.output)[at];
    if (features.find("Filesystem features:") == std::string::npos)
        throw Error(ErrorCode::internal,
                    "cannot read the features of the volume image " + imagePath_ + ": " +
                        joinVolumeErrors(DebugfsScript::errorLines(result.errors)));
    return DebugfsScript::hasFeature(features, "needs_recovery");
}

void VolumeImage::recoverJournal() {
    if (!needsRecovery()) return;
    ToolResult result = runTool("e2fsck", {"-E", "journal_only", "-p"}, true);
    // e2fsck: 1 errors corrected, 2 reboot needed; 4 and up: not done.
    if (result.signal != 0 || result.exitCode < 0 || result.exitCode >= 4)
        throw Error(ErrorCode::unprocessable,
                    "the volume's journal could not be replayed: " + toolMessages(result));
    if (needsRecovery())
        throw Error(ErrorCode::internal, "the volume's journal still needs replaying after e2fsck");
    logInfo("volumes", "replayed the journal of " + imagePath_);
}

void VolumeImage::grow(std::uint64_t newSizeBytes) {
    std::uint64_t size = volumeFileSize(openImage(true).get());
    if (newSizeBytes < size)
        throw Error(ErrorCode::bad_request, "a volume only grows: " + std::to_string(newSizeBytes) +
                                                " bytes is less than its " + std::to_string(size));
    // Equal: a grow cut short after the file grew still gets its filesystem
    // grown (resize2fs changes nothing on one that fills the file).
    // resize2fs wants a filesystem e2fsck -f just passed (it replays the journal too).
    ToolResult check = runTool("e2fsck", {"-f", "-p"}, true);
    if (check.signal != 0 || check.exitCode < 0 || (check.exitCode & ~3) != 0)
        throw Error(
            ErrorCode::unprocessable,
            "the volume's filesystem has errors e2fsck -p cannot repair: " + toolMessages(check));
    if (newSizeBytes > size) {
        UniqueFd image = openImage(true);
        if (::ftruncate(image.get(), static_cast<off_t>(newSizeBytes)) != 0) {
            if (errno == ENOSPC || errno == EFBIG)
                throw Error(ErrorCode::insufficient_storage,
                            "no room to grow the volume image " + imagePath_);
            throw Error(ErrorCode::internal,
                        "cannot grow the volume image " + imagePath_ + ": " + std::strerror(errno));
        }
    }
    // A file larger than its filesystem is still a sound volume if this fails.
    ToolResult resized = runTool("resize2fs", {}, true);
    if (resized.signal != 0 || resized.exitCode != 0)
        throw Error(ErrorCode::internal,
                    "resize2fs could not grow the volume: " + toolMessages(resized));
    logInfo("volumes", "grew " + imagePath_ + " to " + std::to_string(newSizeBytes) + " bytes");
}

VolumeStat VolumeImage::stat(const std::string& path) {
    std::string normalized = normalizePath(path);
    Lookup found = lookup(normalized);
    if (!found.found())
        throw Error(ErrorCode::not_found, "nothing at " + normalized + " in the volume");
    return found.last();
}

std::vector<VolumeEntry> VolumeImage::list(const std::string& dirPath) {
    std::string normalized = normalizePath(dirPath);
    // Listed by path in the same run: the lookup proves it holds no link.
    Lookup found = lookup(normalized, {"ls -p " + DebugfsScript::quote(normalized)});
    if (!found.found())
        throw Error(ErrorCode::not_found, "nothing at " + normalized + " in the volume");
    if (found.last().type != "dir")
        throw Error(ErrorCode::bad_request, normalized + " in the volume is not a directory");
    return DebugfsScript::parseListing(found.extra[0]);
}

void VolumeImage::read(const std::string& path, const std::function<bool(std::string_view)>& sink) {
    std::string normalized = normalizePath(path);
    Lookup found = lookup(normalized);
    if (!found.found())
        throw Error(ErrorCode::not_found, "nothing at " + normalized + " in the volume");
    if (found.last().type != "file")
        throw Error(ErrorCode::bad_request, normalized + " in the volume is not a regular file");
    const std::uint64_t size = found.last().size;
    std::uint64_t delivered = 0;
    bool overflow = false, stoppedBySink = false;

    UniqueFd image = openImage(false);
    ToolCommand command;
    // By inode number: the path was checked a component at a time.
    command.argv = {ToolRunner::locate("debugfs"), "-c", "-R",
                    "cat " + inodeSpec(found.inodes.back()), "/dev/fd/3"};
    command.fds = {image.get()};
    command.onOutput = [&](std::string_view chunk) {
        std::uint64_t room = size - delivered;
        if (chunk.size() > room) {
            overflow = true;
            chunk = chunk.substr(0, static_cast<std::size_t>(room));
        }
        if (!chunk.empty()) {
            delivered += chunk.size();
            if (!sink(chunk)) {
                stoppedBySink = true;
                return false;
            }
        }
        return !overflow;
    };
    ToolResult result = runner_.run(command);
    if (stoppedBySink) return;
    if (overflow)
        throw Error(ErrorCode::internal, "debugfs printed more than the size of " + normalized);
    if (delivered != size)
        throw Error(ErrorCode::internal,
                    "read " + std::to_string(delivered) + " of the " + std::to_string(size) +
                        " bytes of " + normalized + ": " +
                        joinVolumeErrors(DebugfsScript::errorLines(result.errors)));
}

void VolumeImage::write(const std::string& path, const std::string& hostFile, unsigned uid,
                        unsigned gid, unsigned mode) {
    std::string normalized = normalizePath(path);
    if (normalized == "/")
        throw Error(ErrorCode::bad_request, "the volume's root is a directory, not a file");
    if ((mode & ~07777u) != 0)
        throw Error(ErrorCode::bad_request, "a file mode holds permission bits alone");
    UniqueFd host(
        ::open(hostFile.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK));
    struct stat hostStat {};
    if (!host || ::fstat(host.get(), &hostStat) != 0 || !S_ISREG(hostStat.st_mode))
        throw Error(ErrorCode::bad_request, "cannot read a regular file at " + hostFile);

    Lookup found = lookupForChange(normalized, false);
    const std::size_t depth = found.components.size(), existing = found.inodes.size() - 1;
    for (std::size_t j = 1; j <= existing && j < depth; ++j)
        if (found.inodes[j].stat.type != "dir")
            throw Error(ErrorCode::conflict,
                        found.prefixes[j - 1] + " in the volume is not a directory");
    const bool replace = found.found();
    if (replace && found.last().type == "dir")
        throw Error(ErrorCode::conflict, normalized + " in the volume is a directory");
    if (replace && found.last().type != "file")
        throw Error(ErrorCode::conflict, normalized + " in the volume is not a regular file");

    const std::string& name = found.components.back();
    const std::string parent = depth == 1 ? "/" : found.prefixes[depth - 2];
    const bool parentExists = existing >= depth - 1;
    // Where the file goes, by inode when it was there already.
    const std::string enterParent =
        "cd " + (parentExists ? inodeSpec(found.inodes[depth - 1]) : DebugfsScript::quote(parent));

    // First the parents and the old file's removal, then the write: an
    // error in the second run is the new file's alone, to clean up.
    if (!parentExists || replace) {
        DebugfsScript prepare;
        prepare.add("cd " + inodeSpec(found.inodes[std::min(existing, depth - 1)]));
        for (std::size_t j = existing; j + 1 < depth; ++j) {
            prepare.add("mkdir " + DebugfsScript::quote(found.components[j]));
            ownVolumePath(prepare, found.prefixes[j], uid, gid, S_IFDIR | 0755);
            prepare.add("cd " + DebugfsScript::quote(found.prefixes[j]));
        }
        if (replace) prepare.add("rm " + DebugfsScript::quote(name));
        ToolResult result = runScript(prepare, true);
        auto errors = DebugfsScript::errorLines(result.errors);
        if (!errors.empty()) failVolumeChange(errors, "make room for " + normalized);
    }

    DebugfsScript writing;
    writing.add(enterParent);
    writing.add("write /dev/fd/4 " + DebugfsScript::quote(name));
    ownVolumePath(writing, normalized, uid, gid, S_IFREG | mode);
    std::size_t check = writing.add("stat " + DebugfsScript::quote(normalized));
    ToolResult result = runScript(writing, true, host.get());
    auto errors = DebugfsScript::errorLines(result.errors);
    if (!errors.empty()) {
        // A write that ran out of room leaves a file of the full size with holes.
        DebugfsScript cleanup;
        cleanup.add(enterParent);
        cleanup.add("rm " + DebugfsScript::quote(name));
        try {
            runScript(cleanup, true);
        } catch (const Error& e) {
            logWarn("volumes",
                    "cannot remove what a failed write left at " + normalized + ": " + e.what());
        }
        failVolumeChange(errors, "write " + normalized);
    }
    auto written = DebugfsScript::parseStat(writing.split(result.output)[check]);
    if (!written || written->stat.type != "file" ||
        written->stat.size != static_cast<std::uint64_t>(hostStat.st_size) ||
        written->stat.uid != uid || written->stat.gid != gid || written->stat.mode != mode)
        throw Error(ErrorCode::internal,
                    "the file written at " + normalized + " in the volume does not check out");
}

void VolumeImage::remove(const std::string& path) {
    std::string normalized = normalizePath(path);
    if (normalized == "/")
        throw Error(ErrorCode::bad_request, "the volume's root cannot be removed");
    // A link at the end goes itself: unlinking never follows it.
    Lookup found = lookupForChange(normalized, true);
    if (!found.found())
        throw Error(ErrorCode::not_found, "nothing at " + normalized + " in the volume");
    const std::size_t depth = found.components.size();
    const bool dir = found.last().type == "dir";

    DebugfsScript script;
    script.add("cd " + inodeSpec(found.inodes[depth - 1]));
    script.add((dir ? "rmdir " : "rm ") + DebugfsScript::quote(found.components.back()));
    std::size_t check = script.add("stat " + DebugfsScript::quote(normalized));
    ToolResult result = runScript(script, true);
    auto errors = DebugfsScript::errorLines(result.errors);
    std::erase(errors, normalized + ": File not found by ext2_lookup");  // the check's, as hoped
    if (!errors.empty()) {
        for (const auto& e : errors)
            if (e.find("directory not empty") != std::string::npos)
                throw Error(ErrorCode::conflict,
                            normalized + " in the volume is a directory with entries");
        failVolumeChange(errors, "remove " + normalized);
    }
    if (DebugfsScript::parseStat(script.split(result.output)[check]))
        throw Error(ErrorCode::internal, normalized + " is still in the volume after its removal");
}

std::uint64_t VolumeImage::usedBytes(const std::string& imagePath) {
    struct stat st {};
    if (::fstatat(AT_FDCWD, imagePath.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) throw Error(ErrorCode::not_found, "no volume image at " + imagePath);
        throw Error(ErrorCode::internal,
                    "cannot stat the volume image " + imagePath + ": " + std::strerror(errno));
    }
    return static_cast<std::uint64_t>(st.st_blocks) * 512;
}

void VolumeImage::format(const std::string& imagePath, std::uint64_t sizeBytes, unsigned ownerUid,
                         unsigned ownerGid, std::chrono::milliseconds timeout) {
    if (sizeBytes < (std::uint64_t(1) << 20))
        throw Error(ErrorCode::bad_request, "a volume takes at least 1 MiB");
    UniqueFd image(::open(imagePath.c_str(),
                          O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600));
    if (!image) {
        if (errno == EEXIST)
            throw Error(ErrorCode::already_exists, "a file is at " + imagePath + " already");
        throw Error(ErrorCode::internal,
                    "cannot create the volume image " + imagePath + ": " + std::strerror(errno));
    }
    try {
        if (::ftruncate(image.get(), static_cast<off_t>(sizeBytes)) != 0) {
            if (errno == ENOSPC || errno == EFBIG)
                throw Error(
                    ErrorCode::insufficient_storage,
                    "no room for a volume image of " + std::to_string(sizeBytes) + " bytes");
            throw Error(ErrorCode::internal,
                        "cannot size the volume image " + imagePath + ": " + std::strerror(errno));
        }
        ToolCommand command;
        command.argv = {ToolRunner::locate("mkfs.ext4"),
                        "-q",
                        "-F",
                        "-m",
                        "0",
                        "-E",
                        "root_owner=" + std::to_string(ownerUid) + ":" + std::to_string(ownerGid) +
                            ",nodiscard",
                        "/dev/fd/3"};
        command.fds = {image.get()};
        command.maxFileBytes = sizeBytes;
        ToolResult result = ToolRunner({}, timeout).run(command);
        if (result.signal != 0 || result.exitCode != 0)
            throw Error(ErrorCode::internal,
                        "mkfs.ext4 failed on " + imagePath + ": " + toolMessages(result));
    } catch (...) {
        ::unlink(imagePath.c_str());
        throw;
    }
}

}  // namespace airlock

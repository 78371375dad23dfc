#include "controller/DiskLayers.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <vector>

#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/SafeFs.hpp"
#include "core/UniqueFd.hpp"

extern char** environ;

namespace airlock {
namespace fs = std::filesystem;

std::uint64_t qcow2VirtualSize(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) throw Error(ErrorCode::internal, "cannot open disk image " + path);
    std::array<unsigned char, 32> header{};
    if (::pread(fd.get(), header.data(), header.size(), 0) != static_cast<ssize_t>(header.size()))
        throw Error(ErrorCode::internal, "short qcow2 header in " + path);
    if (header[0] != 'Q' || header[1] != 'F' || header[2] != 'I' || header[3] != 0xfb)
        throw Error(ErrorCode::internal, path + " is not a qcow2 image");
    std::uint64_t size = 0;
    for (int i = 24; i < 32; ++i) size = (size << 8) | header[static_cast<std::size_t>(i)];
    return size;
}

void requirePlainQcow2(const std::string& path, std::uint64_t maxVirtualBytes) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) throw Error(ErrorCode::bad_request, "cannot open the disk image that came");
    std::array<unsigned char, 104> h{};
    if (::pread(fd.get(), h.data(), h.size(), 0) != static_cast<ssize_t>(h.size()))
        throw Error(ErrorCode::bad_request, "the disk image that came has no qcow2 v3 header");
    auto be = [&](std::size_t at, int bytes) {
        std::uint64_t v = 0;
        for (int i = 0; i < bytes; ++i) v = (v << 8) | h[at + static_cast<std::size_t>(i)];
        return v;
    };
    auto bad = [](const std::string& why) {
        throw Error(ErrorCode::bad_request, "the disk image that came is refused: " + why);
    };
    if (h[0] != 'Q' || h[1] != 'F' || h[2] != 'I' || h[3] != 0xfb) bad("not qcow2");
    if (be(4, 4) != 3) bad("not qcow2 version 3");
    if (be(24, 8) > maxVirtualBytes) bad("its virtual size is over the sandbox's disk");
    if (be(72, 8) != 0) bad("it needs incompatible features (an external data file?)");
    if (be(88, 8) & ~std::uint64_t(1)) bad("it sets autoclear features other than bitmaps");
    std::uint64_t headerLength = be(100, 4);
    if (headerLength < 104 || headerLength > 4096) bad("its header length is out of range");
    // Header extensions: type, length, data padded to 8; type 0 ends them.
    std::uint64_t at = headerLength, cluster = std::uint64_t(1) << std::min<std::uint64_t>(be(20, 4), 21);
    for (int n = 0; n < 64 && at + 8 <= cluster; ++n) {
        std::array<unsigned char, 8> ext{};
        if (::pread(fd.get(), ext.data(), ext.size(), static_cast<off_t>(at)) != 8)
            bad("its header extensions are cut short");
        std::uint32_t type = (std::uint32_t(ext[0]) << 24) | (std::uint32_t(ext[1]) << 16) |
                             (std::uint32_t(ext[2]) << 8) | ext[3];
        std::uint32_t length = (std::uint32_t(ext[4]) << 24) | (std::uint32_t(ext[5]) << 16) |
                               (std::uint32_t(ext[6]) << 8) | ext[7];
        if (type == 0) return;
        if (type == 0x44415441) bad("it names an external data file");
        at += 8 + ((std::uint64_t(length) + 7) & ~std::uint64_t(7));
    }
    bad("its header extensions do not end");
}

namespace {

// No shell: the paths are ours, but argv keeps it that way.
void runQemuImg(std::vector<std::string> args, const std::string& what) {
    args.insert(args.begin(), "qemu-img");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    int rc = posix_spawnp(&pid, "qemu-img", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw Error(ErrorCode::internal, "cannot run qemu-img");
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) throw Error(ErrorCode::internal, "waitpid qemu-img failed");
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw Error(ErrorCode::internal, "qemu-img " + what + " failed");
}

}  // namespace

void createOverlay(const std::string& stagingDir, const std::string& dir, const std::string& name,
                   const std::string& backing, std::uint64_t virtualSize,
                   std::optional<std::pair<unsigned, unsigned>> owner) {
    std::string staged = stagingDir + "/" + newId("ov-") + ".qcow2";
    try {
        runQemuImg({"create", "-q", "-f", "qcow2", "-F", "qcow2", "-u", "-b", backing, staged,
                    std::to_string(virtualSize)},
                   "create " + name);
    } catch (...) {
        ::unlink(staged.c_str());
        throw;
    }
    installDisk(stagingDir, fs::path(staged).filename().string(), dir, name, owner);
}

void installDisk(const std::string& stagingDir, const std::string& stagedName,
                 const std::string& dir, const std::string& name,
                 std::optional<std::pair<unsigned, unsigned>> owner) {
    auto stagingFd = safefs::openDir(stagingDir);
    try {
        auto file = safefs::openFileAt(stagingFd.get(), stagedName);
        ::fchmod(file.get(), 0600);
        if (owner && ::fchown(file.get(), owner->first, owner->second) != 0)
            throw Error(ErrorCode::internal, "cannot hand " + name + " to its QEMU uid");
        // rename() replaces a planted name (even a symlink) instead of following it.
        auto target = safefs::openDir(dir);
        if (::renameat(stagingFd.get(), stagedName.c_str(), target.get(), name.c_str()) != 0)
            throw Error(ErrorCode::internal, "cannot move the disk into " + dir);
    } catch (...) {
        ::unlinkat(stagingFd.get(), stagedName.c_str(), 0);
        throw;
    }
}

void flattenOnto(const std::string& image, const std::string& base) {
    runQemuImg({"rebase", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base, image},
               "rebase (flatten) of " + fs::path(image).filename().string());
}

void rebaseInPlace(const std::string& image, const std::string& base) {
    runQemuImg({"rebase", "-q", "-u", "-f", "qcow2", "-F", "qcow2", "-b", base, image},
               "rebase of " + fs::path(image).filename().string());
}

}  // namespace airlock

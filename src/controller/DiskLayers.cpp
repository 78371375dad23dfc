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

#include "api/IncomingMoves.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/Error.hpp"
#include "core/Log.hpp"
#include "core/UniqueFd.hpp"

namespace airlock::api {

namespace {
constexpr auto kIdle = std::chrono::minutes(10);
constexpr std::uint64_t kMiB = 1024 * 1024;
// The host's commits: trees it built from the guest's files, which a diff bounds.
constexpr std::uint64_t kMaxWorkspacePack = 4096 * kMiB;
}  // namespace

IncomingMoves::IncomingMoves(SandboxMoves& moves) : moves_(moves) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(moves_.arrivalsDir(), ec)) {
        auto name = entry.path().filename().string();
        if (name.rfind("move-", 0) != 0 && name.rfind("leaving-", 0) != 0) continue;
        try {
            safefs::removeTree(entry.path().string());
        } catch (const std::exception& e) {
            logWarn("fleet", "cannot remove " + name + ": " + e.what());
        }
    }
}

IncomingMoves::~IncomingMoves() {
    std::lock_guard lock(mutex_);
    for (const auto& [id, a] : arrivals_) {
        try {
            safefs::removeTree(a.dir);
        } catch (const std::exception& e) {
            logWarn("fleet", "cannot remove " + a.dir + ": " + e.what());
        }
    }
}

void IncomingMoves::begin(const std::string& from, MovedSandbox moved,
                          const std::map<std::string, safefs::FileDigest>& files) {
    const auto& r = moved.record;
    bool pack = files.count(kWorkspace) > 0;
    if (!files.count(kState) || files.size() != 1u + !r.disk.empty() + pack ||
        (!r.disk.empty() && !files.count(kDisk)) || (pack && moved.workspace.empty()))
        throw Error(ErrorCode::bad_request,
                    "a moving sandbox brings its state, its disk when it has one, and its "
                    "workspace's commits when it has a workspace");
    // Bounds from the record: memory state no larger than its memory and
    // QEMU's devices; a disk no larger than its virtual size and qcow2's tables.
    if (files.at(kState).size > (std::uint64_t{r.memoryMib} + 512) * kMiB ||
        (files.count(kDisk) && files.at(kDisk).size > r.diskBytes + 512 * kMiB) ||
        (pack && files.at(kWorkspace).size > kMaxWorkspacePack))
        throw Error(ErrorCode::bad_request, "a moving sandbox's files are larger than it can be");
    for (const auto& [name, d] : files)
        if (d.sha256.size() != 64)
            throw Error(ErrorCode::bad_request, "file " + name + ": sha256 is 64 hex digits");
    std::lock_guard lock(mutex_);
    dropExpired();
    if (arrivals_.count(r.id))
        throw Error(ErrorCode::conflict, "sandbox " + r.id + " is arriving already");
    if (arrivals_.size() >= kMaxArrivals)
        throw Error(ErrorCode::unavailable,
                    std::to_string(kMaxArrivals) + " sandboxes are arriving here already");
    Arrival a;
    a.from = from;
    a.dir = moves_.arrivalsDir() + "/move-" + r.id;
    safefs::removeTree(a.dir);  // what a crash left
    if (::mkdir(a.dir.c_str(), 0700) != 0)
        throw Error(ErrorCode::internal, "cannot create " + a.dir + ": " + std::strerror(errno));
    for (const auto& [name, d] : files) {
        UniqueFd fd(
            ::open((a.dir + "/" + name).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
        if (!fd) throw Error(ErrorCode::internal, "cannot create " + name + " for " + r.id);
        a.received[name] = 0;
    }
    a.expected = files;
    a.moved = std::move(moved);
    a.touched = std::chrono::steady_clock::now();
    a.serial = ++serials_;
    std::string id = a.moved.record.id;
    arrivals_.emplace(id, std::move(a));
    logInfo("fleet", "sandbox " + id + " is arriving from node " + from);
}

IncomingMoves::Arrival& IncomingMoves::find(const std::string& from, const std::string& id) {
    auto it = arrivals_.find(id);
    if (it == arrivals_.end() || it->second.from != from)
        throw Error(ErrorCode::not_found, "no sandbox " + id + " arriving from node " + from);
    return it->second;
}

void IncomingMoves::write(const std::string& from, const std::string& id, const std::string& file,
                          std::uint64_t offset, std::string_view bytes) {
    std::string path;
    std::uint64_t serial = 0;
    {
        std::lock_guard lock(mutex_);
        auto& a = find(from, id);
        if (a.starting) throw Error(ErrorCode::conflict, "sandbox " + id + " is starting already");
        if (a.writing)
            throw Error(ErrorCode::conflict, "a piece of " + id + " is being written already");
        auto expected = a.expected.find(file);
        if (expected == a.expected.end())
            throw Error(ErrorCode::bad_request, "sandbox " + id + " brings no file '" + file + "'");
        auto got = a.received[file];
        if (offset != got)
            throw Error(ErrorCode::conflict, "file " + file + " of " + id + " is at byte " +
                                                 std::to_string(got) + ", not " +
                                                 std::to_string(offset));
        if (bytes.size() > kPieceBytes || got + bytes.size() > expected->second.size)
            throw Error(ErrorCode::bad_request,
                        "file " + file + " of " + id + " goes past the size it was announced with");
        a.writing = true;
        serial = a.serial;
        path = a.dir + "/" + file;
    }
    // Written outside the lock: other arrivals' pieces go on meanwhile.
    auto finish = [&](bool wrote) {
        std::lock_guard lock(mutex_);
        auto it = arrivals_.find(id);
        if (it == arrivals_.end() || it->second.serial != serial) return false;
        it->second.writing = false;
        if (wrote) it->second.received[file] += bytes.size();
        it->second.touched = std::chrono::steady_clock::now();
        return true;
    };
    try {
        UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
        if (!fd) throw Error(ErrorCode::internal, "cannot open " + file + " of " + id);
        for (std::size_t done = 0; done < bytes.size();) {
            ssize_t n = ::pwrite(fd.get(), bytes.data() + done, bytes.size() - done,
                                 static_cast<off_t>(offset + done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0)
                throw Error(ErrorCode::insufficient_storage,
                            "cannot write " + file + " of " + id + ": " + std::strerror(errno));
            done += static_cast<std::size_t>(n);
        }
    } catch (...) {
        finish(false);
        throw;
    }
    if (!finish(true))
        throw Error(ErrorCode::not_found, "sandbox " + id + " stopped arriving from node " + from);
}

SandboxRecord IncomingMoves::commit(const std::string& from, const std::string& id,
                                    const SecretCipher& journey,
                                    const std::function<void(const SandboxRecord&)>& placed) {
    MovedSandbox moved;
    std::string dir;
    std::map<std::string, safefs::FileDigest> expected;
    {
        std::lock_guard lock(mutex_);
        auto& a = find(from, id);
        if (a.starting) throw Error(ErrorCode::conflict, "sandbox " + id + " is starting already");
        if (a.writing)
            throw Error(ErrorCode::conflict, "a piece of " + id + " is still being written");
        for (const auto& [name, d] : a.expected)
            if (a.received[name] != d.size)
                throw Error(ErrorCode::conflict, "file " + name + " of " + id + " has " +
                                                     std::to_string(a.received[name]) + " of its " +
                                                     std::to_string(d.size) + " bytes");
        a.starting = true;
        moved = a.moved;
        dir = a.dir;
        expected = a.expected;
    }
    try {
        for (const auto& [name, d] : expected) {
            auto got = safefs::digest(dir + "/" + name);
            if (got.sha256 != d.sha256 || got.size != d.size)
                throw Error(ErrorCode::bad_request,
                            "file " + name + " of " + id + " arrived altered (SHA-256 differs)");
        }
        auto r = moves_.moveIn(moved, journey, dir + "/" + kState,
                               expected.count(kDisk) ? dir + "/" + kDisk : std::string(),
                               expected.count(kWorkspace) ? dir + "/" + kWorkspace : std::string(),
                               from);
        try {
            placed(r);
        } catch (const std::exception& e) {
            // Not findable here: the sending node keeps it, and resumes it.
            moves_.dropLocalCopy(id, std::string("the fleet could not record it: ") + e.what());
            throw;
        }
        drop(id);
        return r;
    } catch (...) {
        drop(id);
        throw;
    }
}

void IncomingMoves::abort(const std::string& from, const std::string& id) {
    {
        std::lock_guard lock(mutex_);
        auto& a = find(from, id);
        if (a.starting) throw Error(ErrorCode::conflict, "sandbox " + id + " is starting already");
    }
    drop(id);
    logInfo("fleet", "sandbox " + id + " is no longer arriving from node " + from);
}

void IncomingMoves::drop(const std::string& id) {
    std::string dir;
    {
        std::lock_guard lock(mutex_);
        auto it = arrivals_.find(id);
        if (it == arrivals_.end()) return;
        dir = it->second.dir;
        arrivals_.erase(it);
    }
    try {
        safefs::removeTree(dir);
    } catch (const std::exception& e) {
        logWarn("fleet", "cannot remove " + dir + ": " + e.what());
    }
}

void IncomingMoves::dropExpired() {
    auto now = std::chrono::steady_clock::now();
    for (auto it = arrivals_.begin(); it != arrivals_.end();) {
        if (!it->second.starting && now - it->second.touched > kIdle) {
            logWarn("fleet", "sandbox " + it->first + " stopped arriving from node " +
                                 it->second.from + ": dropped");
            try {
                safefs::removeTree(it->second.dir);
            } catch (const std::exception& e) {
                logWarn("fleet", "cannot remove " + it->second.dir + ": " + e.what());
            }
            it = arrivals_.erase(it);
        } else {
            ++it;
        }
    }
}

}  // namespace airlock::api

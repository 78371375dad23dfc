#include "hypervisor/MigrationStream.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "core/Error.hpp"

namespace airlock {
namespace {

sockaddr_un unixAddress(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) throw Error(ErrorCode::internal, "socket path too long: " + path);
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    return addr;
}

[[noreturn]] void fail(const std::string& what) {
    throw Error(ErrorCode::hypervisor_error, what + ": " + std::strerror(errno));
}

}  // namespace

UniqueFd MigrationStream::listenAt(const std::string& path) {
    ::unlink(path.c_str());
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) fail("socket");
    auto addr = unixAddress(path);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("bind " + path);
    // The directory (QEMU's own) is the access control; the socket itself
    // must be writable by that user. QEMU can write the directory, so the
    // name is never followed (a planted symlink would redirect the chmod).
    if (::fchmodat(AT_FDCWD, path.c_str(), 0666, AT_SYMLINK_NOFOLLOW) != 0) fail("chmod " + path);
    if (::listen(fd.get(), 1) != 0) fail("listen " + path);
    return fd;
}

std::uint64_t MigrationStream::receiveToFile(int listener, const std::string& statePath,
                                             std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    auto remainingMs = [&] {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        return static_cast<int>(std::max<long long>(0, left.count()));
    };
    pollfd p{listener, POLLIN, 0};
    int rc = ::poll(&p, 1, remainingMs());
    if (rc == 0) throw Error(ErrorCode::hypervisor_error, "QEMU did not connect its migration stream");
    if (rc < 0) fail("poll");
    UniqueFd conn(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) fail("accept");
    UniqueFd out(::open(statePath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!out) fail("create " + statePath);
    std::vector<char> buf(1 << 20);
    std::uint64_t total = 0;
    while (true) {
        pollfd c{conn.get(), POLLIN, 0};
        rc = ::poll(&c, 1, remainingMs());
        if (rc == 0) throw Error(ErrorCode::hypervisor_error, "migration stream stalled");
        if (rc < 0) {
            if (errno == EINTR) continue;
            fail("poll");
        }
        ssize_t n = ::read(conn.get(), buf.data(), buf.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("read migration stream");
        }
        if (n == 0) break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = ::write(out.get(), buf.data() + off, static_cast<std::size_t>(n - off));
            if (w < 0) {
                if (errno == EINTR) continue;
                fail("write " + statePath);
            }
            off += w;
        }
        total += static_cast<std::uint64_t>(n);
    }
    if (::fsync(out.get()) != 0) fail("fsync " + statePath);
    return total;
}

void MigrationStream::wake(const std::string& path) noexcept {
    try {
        UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        auto addr = unixAddress(path);
        if (fd) (void)::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    } catch (...) {
    }
}

std::uint64_t MigrationStream::sendFile(const std::string& socketPath, const std::string& statePath,
                                        std::chrono::milliseconds timeout) {
    UniqueFd in(::open(statePath.c_str(), O_RDONLY | O_CLOEXEC));
    if (!in) fail("open " + statePath);
    struct stat st {};
    if (::fstat(in.get(), &st) != 0) fail("stat " + statePath);
    auto addr = unixAddress(socketPath);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    UniqueFd conn;
    while (true) {
        conn.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (!conn) fail("socket");
        if (::connect(conn.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
            int buf = 8 << 20;
            ::setsockopt(conn.get(), SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
            break;
        }
        if (std::chrono::steady_clock::now() > deadline) fail("connect " + socketPath);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::uint64_t total = 0;
    auto size = static_cast<std::uint64_t>(st.st_size);
    while (total < size) {
        ssize_t n = ::sendfile(conn.get(), in.get(), nullptr, static_cast<std::size_t>(size - total));
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("send migration stream");
        }
        if (n == 0) break;
        total += static_cast<std::uint64_t>(n);
    }
    return total;
}

}  // namespace airlock

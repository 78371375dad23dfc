#include "workspace/GitSocket.hpp"

#include <fcntl.h>
#include <git2.h>
#include <git2/sys/stream.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

namespace airlock::workspace {
namespace {

struct Settings {
    egress::AddressPolicy policy;
    std::chrono::seconds connectTimeout{30}, ioTimeout{120};
};
Settings* settings = nullptr;  // set once, never freed (libgit2 may use it until exit)

struct GuardedStream {
    git_stream parent;  // first: libgit2 casts between the two
    std::string host, port;
    int fd = -1;
};

int failSocket(const std::string& why) {
    git_error_set_str(GIT_ERROR_NET, why.c_str());
    return -1;
}

boost::asio::ip::address addressOf(const sockaddr* sa) {
    if (sa->sa_family == AF_INET) {
        auto* sin = reinterpret_cast<const sockaddr_in*>(sa);
        return boost::asio::ip::address_v4(ntohl(sin->sin_addr.s_addr));
    }
    auto* sin6 = reinterpret_cast<const sockaddr_in6*>(sa);
    boost::asio::ip::address_v6::bytes_type bytes;
    std::memcpy(bytes.data(), sin6->sin6_addr.s6_addr, 16);
    return boost::asio::ip::address_v6(bytes);
}

int connectOne(const addrinfo* a, std::chrono::seconds timeout) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) return -1;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
        ::close(fd);
        return -1;
    }
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (::poll(&p, 1, static_cast<int>(timeout.count() * 1000)) != 1 ||
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        ::close(fd);
        return -1;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

int streamConnect(git_stream* stream) {
    auto* s = reinterpret_cast<GuardedStream*>(stream);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_family = AF_UNSPEC;
    addrinfo* res = nullptr;
    if (int rc = ::getaddrinfo(s->host.c_str(), s->port.c_str(), &hints, &res); rc != 0)
        return failSocket("cannot resolve " + s->host + ": " + gai_strerror(rc));
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> hold(res, ::freeaddrinfo);
    std::string refused;
    for (const addrinfo* a = res; a; a = a->ai_next) {
        if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
        auto addr = addressOf(a->ai_addr);
        if (auto why = gitConnectRefusal(addr, settings->policy, ClearTextCredential::active())) {
            refused = addr.to_string() + " " + *why;
            continue;
        }
        int fd = connectOne(a, settings->connectTimeout);
        if (fd < 0) continue;
        timeval tv{static_cast<time_t>(settings->ioTimeout.count()), 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        s->fd = fd;
        return 0;
    }
    if (!refused.empty()) return failSocket("refused to connect to " + s->host + ": " + refused);
    return failSocket("cannot connect to " + s->host + ":" + s->port);
}

ssize_t streamRead(git_stream* stream, void* data, size_t len) {
    auto* s = reinterpret_cast<GuardedStream*>(stream);
    while (true) {
        ssize_t n = ::recv(s->fd, data, len, 0);
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return failSocket("the remote stopped answering (read timed out)");
        return failSocket(std::string("read: ") + std::strerror(errno));
    }
}

ssize_t streamWrite(git_stream* stream, const char* data, size_t len, int) {
    auto* s = reinterpret_cast<GuardedStream*>(stream);
    while (true) {
        ssize_t n = ::send(s->fd, data, len, MSG_NOSIGNAL);
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return failSocket("the remote stopped reading (write timed out)");
        return failSocket(std::string("write: ") + std::strerror(errno));
    }
}

int streamClose(git_stream* stream) {
    auto* s = reinterpret_cast<GuardedStream*>(stream);
    if (s->fd >= 0) ::close(s->fd);
    s->fd = -1;
    return 0;
}

void streamFree(git_stream* stream) {
    auto* s = reinterpret_cast<GuardedStream*>(stream);
    if (s->fd >= 0) ::close(s->fd);
    delete s;
}

int streamInit(git_stream** out, const char* host, const char* port) {
    auto* s = new GuardedStream{};
    s->parent.version = GIT_STREAM_VERSION;
    s->parent.connect = streamConnect;
    s->parent.read = streamRead;
    s->parent.write = streamWrite;
    s->parent.close = streamClose;
    s->parent.free = streamFree;
    s->host = host ? host : "";
    s->port = port ? port : "";
    *out = &s->parent;
    return 0;
}

thread_local bool clearTextOnThisThread = false;

}  // namespace

ClearTextCredential::ClearTextCredential(bool active) : previous_(clearTextOnThisThread) {
    clearTextOnThisThread = previous_ || active;
}
ClearTextCredential::~ClearTextCredential() { clearTextOnThisThread = previous_; }
bool ClearTextCredential::active() { return clearTextOnThisThread; }

std::optional<std::string> gitConnectRefusal(const boost::asio::ip::address& addr,
                                             const egress::AddressPolicy& policy,
                                             bool clearTextCredential) {
    if (auto why = policy.refusal(addr))
        return "is a " + *why + " address the operator has not opened";
    if (clearTextCredential && !policy.operatorAllowed(addr))
        return "is not in a range the operator opened, and a credential goes there only over "
               "https";
    return std::nullopt;
}

void installGitSocket(const egress::AddressPolicy& policy, std::chrono::seconds connectTimeout,
                      std::chrono::seconds ioTimeout) {
    static std::mutex m;
    std::lock_guard lock(m);
    if (!settings)
        settings = new Settings{policy, connectTimeout, ioTimeout};
    else
        *settings = Settings{policy, connectTimeout, ioTimeout};
    static git_stream_registration registration{GIT_STREAM_VERSION, streamInit, nullptr};
    git_stream_register(GIT_STREAM_STANDARD, &registration);
}

}  // namespace airlock::workspace

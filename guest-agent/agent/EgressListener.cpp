#include "agent/EgressListener.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "agent/ExecStream.hpp"

namespace airlock::guest {

EgressListener::EgressListener(std::uint32_t id, FrameSink& sink,
                               const protocol::PortRequest& request)
    : StreamHandler(id, sink) {
    listen(static_cast<int>(request.port));
}

void EgressListener::listen(int port) {
    if (port < 0 || port > 65535) return fail("bad_request", "port must be 0-65535");
    listener_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!listener_) return fail("io_error", std::strerror(errno));
    int one = 1;
    ::setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    // Loopback only: the proxy is for this guest's commands, nothing else.
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener_.get(), static_cast<int>(kMaxPending)) != 0)
        return fail("io_error", "cannot listen on 127.0.0.1:" + std::to_string(port) + ": " +
                                    std::strerror(errno));
    socklen_t len = sizeof addr;
    ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    sendControl(protocol::ListenerReady{ntohs(addr.sin_port)});
}

void EgressListener::collectFds(PollSet& set) {
    if (done() || !listener_) return;
    // Announcements are control frames: none while the port queue is full.
    if (pending_.size() < kMaxPending && sink_.outputRoom()) set.add(listener_.get(), POLLIN, this);
}

void EgressListener::onFdReady(int, short) {
    while (pending_.size() < kMaxPending) {
        UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!conn) return;
        // Numbered across every listener of the agent: an attach names the
        // connection alone (egress and the package ports share the op).
        static std::uint64_t nextConnection = 1;
        std::uint64_t n = nextConnection++;
        pending_[n] = Pending{std::move(conn), monotonicMs()};
        sendControl(protocol::ListenerAccepted{n});
    }
}

void EgressListener::tick(std::int64_t nowMs) {
    // A host that never attaches (gone, or refusing) must not pin sockets:
    // the client sees its connection closed.
    std::erase_if(pending_,
                  [&](const auto& p) { return nowMs - p.second.acceptedMs > kPendingTimeoutMs; });
}

void EgressListener::onCloseWrite() { finish({{"closed", true}}); }

UniqueFd EgressListener::take(std::uint64_t connection) {
    auto it = pending_.find(connection);
    if (it == pending_.end()) return UniqueFd();
    UniqueFd fd = std::move(it->second.fd);
    pending_.erase(it);
    return fd;
}

}  // namespace airlock::guest

#include "agent/TunnelStream.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace airlock::guest {

TunnelStream::TunnelStream(std::uint32_t id, FrameSink& sink, const protocol::PortRequest& request)
    : StreamHandler(id, sink) {
    start(request.port);
}

TunnelStream::TunnelStream(std::uint32_t id, FrameSink& sink, UniqueFd connected)
    : StreamHandler(id, sink), sock_(std::move(connected)), connected_(true), halfClose_(true) {}

void TunnelStream::start(unsigned portWanted) {
    int port = static_cast<int>(portWanted);
    if (port < 1 || port > 65535) return fail("bad_request", "port must be 1-65535");
    sock_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!sock_) return fail("io_error", std::strerror(errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(sock_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        connected_ = true;
    } else if (errno != EINPROGRESS) {
        fail(errno == ECONNREFUSED ? "connection_refused" : "io_error",
             "cannot connect to guest port " + std::to_string(port) + ": " + std::strerror(errno));
    }
}

void TunnelStream::collectFds(PollSet& set) {
    if (done() || !sock_) return;
    short events = 0;
    if (!connected_ || !pending_.empty()) events |= POLLOUT;
    if (connected_ && !readEof_ && sendable() > 0) events |= POLLIN;
    if (events) set.add(sock_.get(), events, this);
}

void TunnelStream::onFdReady(int, short revents) {
    if (!connected_) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(sock_.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        if (err)
            return fail(err == ECONNREFUSED ? "connection_refused" : "io_error",
                        std::string("cannot connect to the guest port: ") + std::strerror(err));
        connected_ = true;
        sendControl(protocol::TunnelConnected{});
    }
    if (revents & POLLOUT) flushToSocket();
    if ((revents & (POLLIN | POLLHUP | POLLERR)) && !readEof_) {
        std::size_t room = sendable();
        if (room == 0) return;
        std::string buf(room, '\0');
        ssize_t n = ::read(sock_.get(), buf.data(), room);
        if (n > 0) {
            buf.resize(static_cast<std::size_t>(n));
            sendData(1, buf);
        } else if (n == 0) {
            readEof_ = true;
        } else if (errno != EAGAIN && errno != EINTR) {
            readEof_ = true;
            broken_ = true;
        }
    }
}

void TunnelStream::flushToSocket() {
    while (!pending_.empty()) {
        ssize_t n = ::send(sock_.get(), pending_.data(), pending_.size(), MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) return;
            readEof_ = true;
            broken_ = true;
            pending_.clear();
            return;
        }
        pending_.erase(0, static_cast<std::size_t>(n));
        grant(static_cast<std::size_t>(n));
    }
    if (hostEof_) ::shutdown(sock_.get(), SHUT_WR);
}

void TunnelStream::onData(std::uint8_t channel, std::string bytes) {
    if (channel != 0) return fail("bad_frame", "tunnels take data on channel 0");
    pending_ += bytes;
    if (connected_) flushToSocket();
}

void TunnelStream::onCloseWrite() {
    hostEof_ = true;
    if (connected_ && pending_.empty()) ::shutdown(sock_.get(), SHUT_WR);
}

void TunnelStream::tick(std::int64_t) {
    if (done() || !readEof_) return;
    if (!halfClose_ || broken_) return finish({{"closed", true}});
    if (!eofSent_) {
        eofSent_ = true;
        sendControl(protocol::TunnelEof{});
    }
    if (hostEof_ && pending_.empty()) finish({{"closed", true}});
}

}  // namespace airlock::guest

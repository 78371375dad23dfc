#include "support/FakeGuest.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <stdexcept>

#include "protocol/Messages.hpp"

namespace airlock::test {
using namespace std::chrono_literals;
using protocol::Frame;
using protocol::FrameType;

FakeGuest::FakeGuest(Script script) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
        throw std::runtime_error("socketpair");
    host_.reset(fds[0]);
    guest_.reset(fds[1]);
    thread_ = std::thread([this, script = std::move(script)] {
        try {
            Frame hello;
            if (!read(hello, 5s) || hello.type != FrameType::hello) return;
            auto h = protocol::parseHello(hello.payload);
            send(FrameType::hello_ack, 0,
                 protocol::toJson(protocol::HelloAck{1, h.nonce, 1, "fake"}));
            script(*this);
        } catch (...) {
        }
        done_ = true;
    });
}

FakeGuest::~FakeGuest() {
    stop_ = true;
    ::shutdown(guest_.get(), SHUT_RDWR);
    thread_.join();
}

bool FakeGuest::read(Frame& out, std::chrono::milliseconds wait) {
    auto deadline = std::chrono::steady_clock::now() + wait;
    char buf[65536];
    while (!stop_) {
        if (decoder_.next(out) == protocol::FrameDecoder::Result::frame) return true;
        if (std::chrono::steady_clock::now() > deadline) return false;
        pollfd p{guest_.get(), POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        ssize_t n = ::read(guest_.get(), buf, sizeof buf);
        if (n <= 0) return false;
        decoder_.feed(std::string_view(buf, static_cast<std::size_t>(n)));
    }
    return false;
}

bool FakeGuest::readType(FrameType type, Frame& out, std::chrono::milliseconds wait) {
    auto deadline = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < deadline)
        if (read(out, 200ms) && out.type == type) return true;
    return false;
}

void FakeGuest::send(FrameType type, std::uint32_t stream, std::string_view payload,
                     std::uint8_t flags) {
    writeRaw(protocol::encodeFrame(type, stream, payload, flags));
}

void FakeGuest::writeRaw(const std::string& bytes) {
    std::size_t off = 0;
    while (off < bytes.size()) {
        ssize_t n = ::send(guest_.get(), bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
        if (n <= 0) return;
        off += static_cast<std::size_t>(n);
    }
}

}  // namespace airlock::test

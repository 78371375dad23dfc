// libFuzzer target: the host side of the agent channel (AgentConnection and
// AgentStream dispatch) after a valid handshake, fed well-framed frames of
// every type on every stream with arbitrary payloads, as root in a guest
// could send them. It must never crash, leak or hang: at worst the session
// ends. Streams 1-3 are open (a pushed exec, a pulled stream, a call).
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>

#include "agentclient/AgentConnection.hpp"
#include "protocol/Frame.hpp"
#include "protocol/FrameDecoder.hpp"
#include "protocol/Messages.hpp"

using namespace airlock;
using namespace std::chrono_literals;

namespace {
// Answers every hello until the connection is established: the host resends
// its hello (with a new nonce) when an answer is slow, and libFuzzer's timer
// signal can interrupt a read, so neither may fail the harness.
bool answerHellos(int fd, std::future<std::shared_ptr<AgentConnection>>& connecting) {
    protocol::FrameDecoder decoder;
    char buf[4096];
    while (connecting.wait_for(0s) != std::future_status::ready) {
        pollfd p{fd, POLLIN, 0};
        int r = ::poll(&p, 1, 50);
        if (r < 0 && errno != EINTR) return false;
        if (r <= 0) continue;
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return false;
        decoder.feed(std::string_view(buf, static_cast<std::size_t>(n)));
        protocol::Frame frame;
        while (decoder.next(frame) == protocol::FrameDecoder::Result::frame) {
            if (frame.type != protocol::FrameType::hello) continue;
            auto hello = protocol::parseHello(frame.payload);
            auto ack = protocol::encodeFrame(
                protocol::FrameType::hello_ack, 0,
                protocol::toJson(protocol::HelloAck{1, hello.nonce, 1, "fuzz"}));
            if (::send(fd, ack.data(), ack.size(), MSG_NOSIGNAL) !=
                static_cast<ssize_t>(ack.size()))
                return false;
        }
        if (connecting.wait_for(200ms) == std::future_status::ready) return true;
    }
    return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return 0;
    UniqueFd guest(fds[1]);
    auto connecting = std::async(
        std::launch::async, [fd = fds[0]] { return AgentConnection::fromFd(UniqueFd(fd), 5s); });
    if (!answerHellos(guest.get(), connecting)) std::abort();
    auto conn = connecting.get();
    protocol::ExecRequest exec;
    exec.argv = {"true"};
    auto pending =
        conn->execAsync(exec, 4096, [](std::optional<ExecOutput>, std::exception_ptr) {});
    auto pulled = conn->open({{"op", "file_read"}, {"path", "/x"}});
    auto calling = std::async(std::launch::async, [&] {
        try {
            conn->call({{"op", "fs"}, {"action", "list"}, {"path", "/"}}, 2s);
        } catch (const std::exception&) {
        }
    });
    // Records: type, stream (mod 5), flags, payload length (u16), payload.
    std::string wire;
    std::size_t i = 0;
    while (i + 5 <= size) {
        auto type = static_cast<protocol::FrameType>(1 + data[i] % 10);
        std::uint32_t stream = data[i + 1] % 5;
        std::uint8_t flags = data[i + 2];
        std::size_t len = std::min<std::size_t>(
            (static_cast<std::size_t>(data[i + 3]) << 8 | data[i + 4]) * 8, protocol::kMaxPayload);
        i += 5;
        std::string payload;
        std::size_t take = std::min(len, size - i);
        payload.assign(reinterpret_cast<const char*>(data + i), take);
        i += take;
        if (len > take) payload.resize(len, 'x');  // long data frames test the windows
        wire += protocol::encodeFrame(type, stream, payload, flags);
    }
    // Whatever the host writes back is read and dropped, so it never stalls.
    std::thread drain([fd = guest.get()] {
        char buf[65536];
        for (;;) {
            ssize_t n = ::read(fd, buf, sizeof buf);
            if (n > 0 || (n < 0 && errno == EINTR)) continue;
            break;
        }
    });
    // A session the host ended (a protocol breach) stops reading but keeps
    // its end open until the connection is destroyed: the guest's writes
    // then wait, as a real guest's would. Never block on that.
    for (std::size_t off = 0; off < wire.size();) {
        ssize_t n =
            ::send(guest.get(), wire.data() + off, wire.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!conn->alive()) break;
            pollfd p{guest.get(), POLLOUT, 0};
            ::poll(&p, 1, 10);
            continue;
        }
        if (n <= 0) break;
        off += static_cast<std::size_t>(n);
    }
    ::shutdown(guest.get(), SHUT_WR);  // EOF: the session must end
    for (int t = 0; t < 500 && conn->alive(); ++t) std::this_thread::sleep_for(1ms);
    conn->closeAndWait();
    ::shutdown(guest.get(), SHUT_RDWR);
    drain.join();
    calling.wait();
    while (pulled->next(std::chrono::steady_clock::now())) {
    }
    if (!pending->ended()) std::abort();  // every path ends a pending exec
    return 0;
}

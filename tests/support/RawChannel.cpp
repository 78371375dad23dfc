#include "support/RawChannel.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "agentclient/AgentTransport.hpp"
#include "protocol/Frame.hpp"
#include "protocol/Messages.hpp"

namespace airlock::test {
using Clock = std::chrono::steady_clock;
using protocol::FrameType;

namespace {
struct TimedOut : std::runtime_error {
    TimedOut() : std::runtime_error("raw channel: timed out") {}
};

int msUntil(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) throw TimedOut();
    return static_cast<int>(std::min<long long>(left.count(), 1000));
}

// Every wait is a poll with a deadline: a stalled agent never blocks a write.
void nonBlocking(int fd) {
    int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}
}  // namespace

RawChannel::RawChannel(const std::string& endpoint, std::chrono::milliseconds wait) {
    auto deadline = Clock::now() + wait;
    while (!(fd_ = openAgentStream(endpoint))) {
        msUntil(deadline);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    nonBlocking(fd_.get());
    hello(deadline);
}

RawChannel::RawChannel(UniqueFd channel, std::chrono::milliseconds wait) : fd_(std::move(channel)) {
    nonBlocking(fd_.get());
    hello(Clock::now() + wait);
}

void RawChannel::hello(Deadline deadline) {
    // A hello sent while the guest still sees the old host gone is dropped
    // with its stale bytes: sent again until one is answered. Bytes of the
    // previous session may come first: skipped up to the next frame.
    decoder_.setResync(true);
    for (int attempt = 0;; ++attempt) {
        std::string nonce = "raw-bench-" + std::to_string(attempt);
        writeAll(protocol::encodeFrame(
                     FrameType::hello, 0,
                     protocol::toJson(protocol::Hello{protocol::kProtocolVersion, nonce})),
                 deadline);
        try {
            auto retry = std::min(deadline, Clock::now() + std::chrono::milliseconds(500));
            while (true) {
                auto f = nextFrame(retry);
                if (f.type == FrameType::hello_ack &&
                    protocol::parseHelloAck(f.payload).nonce == nonce) {
                    decoder_.setResync(false);
                    return;
                }
            }
        } catch (const TimedOut&) {
            if (Clock::now() >= deadline) throw;
        }
    }
}

bool RawChannel::ping(std::chrono::milliseconds wait) {
    auto deadline = Clock::now() + wait;
    try {
        writeAll(protocol::encodeFrame(FrameType::ping, 0, ""), deadline);
        while (nextFrame(deadline).type != FrameType::pong) {
        }
        return true;
    } catch (const std::exception&) {
        return false;
    }
}

void RawChannel::writeAll(std::string_view bytes, Deadline deadline) {
    while (!bytes.empty()) {
        pollfd p{fd_.get(), POLLOUT, 0};
        if (::poll(&p, 1, msUntil(deadline)) <= 0) continue;
        ssize_t n = ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            throw std::runtime_error("raw channel: write failed");
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
}

void RawChannel::readSome(Deadline deadline) {
    static thread_local char buf[256 * 1024];
    while (true) {
        pollfd p{fd_.get(), POLLIN, 0};
        if (::poll(&p, 1, msUntil(deadline)) <= 0) continue;
        ssize_t n = ::read(fd_.get(), buf, sizeof buf);
        if (n > 0) {
            raw_.append(buf, static_cast<std::size_t>(n));
            return;
        }
        if (n == 0) throw std::runtime_error("raw channel: the agent hung up");
        if (errno != EINTR && errno != EAGAIN) throw std::runtime_error("raw channel: read failed");
    }
}

protocol::Frame RawChannel::nextFrame(Deadline deadline) {
    protocol::Frame frame;
    while (true) {
        decoder_.feed(raw_);
        raw_.clear();
        auto r = decoder_.next(frame);
        if (r == protocol::FrameDecoder::Result::error)
            throw std::runtime_error("raw channel: bad framing: " + decoder_.lastError());
        if (r == protocol::FrameDecoder::Result::frame) {
            // Raw bytes may follow at once: they are not frames.
            raw_ = decoder_.takeBuffered();
            return frame;
        }
        readSome(deadline);
    }
}

void RawChannel::waitRaw(std::uint64_t count, Deadline deadline) {
    while (raw_.size() < count) readSome(deadline);
    raw_.erase(0, static_cast<std::size_t>(count));
}

std::vector<std::chrono::nanoseconds> RawChannel::run(const std::string& mode, std::uint64_t bytes,
                                                      std::chrono::milliseconds wait) {
    auto deadline = Clock::now() + wait;
    std::uint32_t stream = nextStream_++;
    nlohmann::json open{{"op", "raw"}, {"mode", mode}, {"bytes", bytes}};
    writeAll(protocol::encodeFrame(FrameType::open, stream, open.dump()), deadline);
    while (true) {
        auto f = nextFrame(deadline);
        if (f.stream != stream) continue;
        if (f.type == FrameType::control) break;  // raw bytes from the next byte on
        throw std::runtime_error("raw channel: the agent refused raw mode: " + f.payload);
    }
    std::vector<std::chrono::nanoseconds> times;
    auto start = Clock::now();
    if (mode == "sink") {
        std::string block(256 * 1024, 's');
        for (std::uint64_t sent = 0; sent < bytes;) {
            auto n = static_cast<std::size_t>(std::min<std::uint64_t>(block.size(), bytes - sent));
            writeAll(std::string_view(block).substr(0, n), deadline);
            sent += n;
        }
    } else if (mode == "source") {
        waitRaw(bytes, deadline);
    } else {
        for (std::uint64_t i = 0; i < bytes; ++i) {
            auto t0 = Clock::now();
            writeAll("e", deadline);
            waitRaw(1, deadline);
            times.push_back(Clock::now() - t0);
        }
    }
    // The agent's close marks the end (for a sink: every byte arrived).
    while (true) {
        auto f = nextFrame(deadline);
        if (f.stream != stream) continue;
        if (f.type == FrameType::close) break;
        if (f.type == FrameType::reset) throw std::runtime_error("raw channel: raw mode failed");
    }
    if (mode != "echo") times.push_back(Clock::now() - start);
    return times;
}

}  // namespace airlock::test

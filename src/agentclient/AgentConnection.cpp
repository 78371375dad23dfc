#include "agentclient/AgentConnection.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"
#include "protocol/Frame.hpp"

namespace airlock {
namespace {
using protocol::FrameType;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kReadChunk = 64 * 1024;

UniqueFd connectUnix(const std::string& path) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return {};
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) throw Error(ErrorCode::internal, "agent socket path too long: " + path);
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return {};
    return fd;
}

// Reads what arrives before `deadline`; returns bytes read, 0 on timeout, -1 on EOF/error.
long readWithDeadline(int fd, std::string& into, Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return 0;
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left));
    if (r <= 0) return 0;
    char buf[kReadChunk];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return -1;
    into.assign(buf, static_cast<std::size_t>(n));
    return n;
}
}  // namespace

struct AgentConnection::Stream {
    std::mutex mutex;
    std::condition_variable cv;
    std::size_t cap = 0;
    ExecOutput output;
    bool done = false;
    std::string error;       // set when the stream was reset or the connection died
    std::string errorCode;
};

AgentConnection::AgentConnection(UniqueFd fd) : fd_(std::move(fd)) {
    wakeFd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    timeval tv{10, 0};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

AgentConnection::~AgentConnection() {
    alive_ = false;
    std::uint64_t one = 1;
    (void)!::write(wakeFd_.get(), &one, sizeof one);
    if (reader_.joinable()) reader_.join();
    failAll("agent connection closed");
}

std::unique_ptr<AgentConnection> AgentConnection::connect(const std::string& socketPath,
                                                          std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    // The socket appears when QEMU starts; until then, retry.
    while (true) {
        UniqueFd fd = connectUnix(socketPath);
        if (fd) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
            return fromFd(std::move(fd), std::max(left, std::chrono::milliseconds(1)));
        }
        if (Clock::now() >= deadline)
            throw Error(ErrorCode::agent_timeout, "agent socket " + socketPath + " did not accept a connection in time");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

std::unique_ptr<AgentConnection> AgentConnection::fromFd(UniqueFd fd, std::chrono::milliseconds timeout) {
    std::unique_ptr<AgentConnection> conn(new AgentConnection(std::move(fd)));
    conn->handshake(timeout);
    conn->startReader();
    return conn;
}

void AgentConnection::handshake(std::chrono::milliseconds timeout) {
    // The first bytes may be a stale tail of a previous session: discard
    // everything until the agent answers the most recent nonce we sent. A
    // hello may also be lost while the guest is still booting, so resend it.
    auto deadline = Clock::now() + timeout;
    decoder_.setResync(true);
    std::string nonce;
    auto nextHello = Clock::now();
    while (Clock::now() < deadline) {
        if (Clock::now() >= nextHello) {
            nonce = newSecretToken().substr(0, 24);
            send(FrameType::hello, 0, protocol::toJson(protocol::Hello{protocol::kProtocolVersion, nonce}));
            nextHello = Clock::now() + std::chrono::milliseconds(500);
        }
        std::string bytes;
        long n = readWithDeadline(fd_.get(), bytes, std::min(deadline, nextHello));
        if (n < 0) throw Error(ErrorCode::agent_error, "agent channel closed during the handshake");
        if (n == 0) continue;
        decoder_.feed(bytes);
        protocol::Frame frame;
        while (decoder_.next(frame) == protocol::FrameDecoder::Result::frame) {
            if (frame.type == FrameType::reset && frame.stream == 0) {
                auto info = protocol::parseResetInfo(frame.payload);
                if (info.code == "version_mismatch")
                    throw Error(ErrorCode::agent_error, "agent refused the protocol version: " + info.message);
                continue;
            }
            if (frame.type != FrameType::hello_ack) continue;
            try {
                auto ack = protocol::parseHelloAck(frame.payload);
                if (ack.nonce != nonce) continue;
                if (ack.version != protocol::kProtocolVersion)
                    throw Error(ErrorCode::agent_error, "agent speaks protocol version " + std::to_string(ack.version));
                epoch_ = ack.epoch;
                agentVersion_ = ack.agent;
                decoder_.setResync(false);
                return;
            } catch (const protocol::MessageError&) {
                continue;
            }
        }
    }
    throw Error(ErrorCode::agent_timeout, "the guest agent did not answer its hello in time");
}

void AgentConnection::startReader() {
    reader_ = std::thread([this] { readerLoop(); });
}

void AgentConnection::send(FrameType type, std::uint32_t stream, const std::string& payload, std::uint8_t flags) {
    std::string bytes = protocol::encodeFrame(type, stream, payload, flags);
    std::lock_guard lock(writeMutex_);
    std::size_t off = 0;
    while (off < bytes.size()) {
        ssize_t n = ::send(fd_.get(), bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            alive_ = false;
            throw Error(ErrorCode::agent_error, std::string("agent channel write failed: ") + std::strerror(errno));
        }
        off += static_cast<std::size_t>(n);
    }
}

void AgentConnection::readerLoop() {
    std::string buf(kReadChunk, '\0');
    while (alive_) {
        pollfd fds[2] = {{fd_.get(), POLLIN, 0}, {wakeFd_.get(), POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (fds[1].revents) break;
        ssize_t n = ::read(fd_.get(), buf.data(), buf.size());
        if (n <= 0) {
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            failAll("agent channel closed (guest gone or agent restarted)");
            break;
        }
        decoder_.feed(std::string_view(buf.data(), static_cast<std::size_t>(n)));
        protocol::Frame frame;
        while (true) {
            auto r = decoder_.next(frame);
            if (r == protocol::FrameDecoder::Result::need_more) break;
            if (r == protocol::FrameDecoder::Result::error) {
                logWarn("agentclient", "protocol error from agent: " + decoder_.lastError());
                failAll("protocol error from agent: " + decoder_.lastError());
                return;
            }
            try {
                dispatch(frame);
            } catch (const std::exception& e) {
                logWarn("agentclient", std::string("dropping connection: ") + e.what());
                failAll(e.what());
                return;
            }
        }
    }
}

void AgentConnection::failAll(const std::string& why) {
    alive_ = false;
    std::map<std::uint32_t, std::shared_ptr<Stream>> streams;
    {
        std::lock_guard lock(streamsMutex_);
        if (failure_.empty()) failure_ = why;
        streams.swap(streams_);
    }
    for (auto& [id, s] : streams) {
        std::lock_guard lock(s->mutex);
        if (!s->done) {
            s->done = true;
            s->error = why;
            s->errorCode = "connection_lost";
        }
        s->cv.notify_all();
    }
    pingCv_.notify_all();
}

void AgentConnection::dispatch(const protocol::Frame& frame) {
    if (frame.type == FrameType::pong) {
        std::lock_guard lock(pingMutex_);
        ++pongsSeen_;
        pingCv_.notify_all();
        return;
    }
    if (frame.stream == 0) {
        if (frame.type == FrameType::reset) {
            auto info = protocol::parseResetInfo(frame.payload);
            failAll("agent reset the session: " + info.code + " " + info.message);
        }
        return;  // a late hello_ack and the like
    }
    std::shared_ptr<Stream> stream;
    {
        std::lock_guard lock(streamsMutex_);
        auto it = streams_.find(frame.stream);
        if (it != streams_.end()) stream = it->second;
    }
    if (!stream) return;  // a cancelled stream's stragglers
    switch (frame.type) {
        case FrameType::data: {
            {
                std::lock_guard lock(stream->mutex);
                auto& out = frame.flags == static_cast<std::uint8_t>(protocol::Channel::stderr_)
                                ? stream->output.stderrData
                                : stream->output.stdoutData;
                std::size_t room = stream->cap > out.size() ? stream->cap - out.size() : 0;
                if (frame.payload.size() > room) stream->output.truncated = true;
                out.append(frame.payload, 0, std::min(room, frame.payload.size()));
            }
            // Consumed (kept or dropped): give the credit back at once so the
            // command is never stalled by a buffered exec.
            send(FrameType::window, frame.stream,
                 protocol::encodeWindowPayload(static_cast<std::uint32_t>(frame.payload.size())));
            return;
        }
        case FrameType::close: {
            std::lock_guard lock(stream->mutex);
            try {
                stream->output.result = protocol::parseExecResult(frame.payload);
            } catch (const protocol::MessageError& e) {
                stream->error = e.message;
                stream->errorCode = "bad_frame";
            }
            stream->done = true;
            stream->cv.notify_all();
            return;
        }
        case FrameType::reset: {
            auto info = protocol::parseResetInfo(frame.payload);
            std::lock_guard lock(stream->mutex);
            stream->done = true;
            stream->error = info.message.empty() ? info.code : info.message;
            stream->errorCode = info.code;
            stream->cv.notify_all();
            return;
        }
        default:
            return;
    }
}

std::shared_ptr<AgentConnection::Stream> AgentConnection::openStream(std::uint32_t& id, std::size_t cap) {
    auto s = std::make_shared<Stream>();
    s->cap = cap;
    std::lock_guard lock(streamsMutex_);
    if (!alive_) throw Error(ErrorCode::agent_error, "agent connection is down: " + failure_);
    id = nextStream_++;
    streams_[id] = s;
    return s;
}

void AgentConnection::closeStream(std::uint32_t id) {
    std::lock_guard lock(streamsMutex_);
    streams_.erase(id);
}

ExecOutput AgentConnection::exec(const protocol::ExecRequest& request, std::size_t outputCap,
                                 std::chrono::milliseconds wait) {
    std::uint32_t id = 0;
    auto stream = openStream(id, outputCap);
    auto started = steadyMillis();
    try {
        send(FrameType::open, id, protocol::toJson(request));
    } catch (...) {
        closeStream(id);
        throw;
    }
    std::unique_lock lock(stream->mutex);
    bool finished = stream->cv.wait_for(lock, wait, [&] { return stream->done; });
    if (!finished) {
        lock.unlock();
        closeStream(id);
        try {
            send(FrameType::reset, id, protocol::toJson(protocol::ResetInfo{"cancelled", "host timeout"}));
        } catch (const Error&) {
        }
        throw Error(ErrorCode::agent_timeout, "the agent did not finish the command in time");
    }
    ExecOutput out = std::move(stream->output);
    std::string error = stream->error, code = stream->errorCode;
    lock.unlock();
    closeStream(id);
    if (!error.empty()) {
        if (code == "bad_request") throw Error(ErrorCode::bad_request, error);
        throw Error(ErrorCode::agent_error, error);
    }
    out.durationMs = steadyMillis() - started;
    return out;
}

bool AgentConnection::ping(std::chrono::milliseconds wait) {
    std::unique_lock lock(pingMutex_);
    std::uint64_t before = pongsSeen_;
    lock.unlock();
    try {
        send(FrameType::ping, 0, "");
    } catch (const Error&) {
        return false;
    }
    lock.lock();
    return pingCv_.wait_for(lock, wait, [&] { return pongsSeen_ > before || !alive_; }) && alive_;
}

}  // namespace airlock

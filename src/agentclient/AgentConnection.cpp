#include "agentclient/AgentConnection.hpp"
#include "agentclient/AgentTransport.hpp"

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

Error agentError(const std::string& code, const std::string& message) {
    if (code == "not_found") return Error(ErrorCode::not_found, message);
    if (code == "conflict" || code == "no_space") return Error(ErrorCode::conflict, message);
    if (code == "permission_denied") return Error(ErrorCode::forbidden, message);
    if (code == "bad_request") return Error(ErrorCode::bad_request, message);
    if (code == "busy") return Error(ErrorCode::unavailable, message);
    return Error(ErrorCode::agent_error, message.empty() ? code : message);
}

AgentConnection::AgentConnection(UniqueFd fd) : fd_(std::move(fd)) {
    wakeFd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    timeval tv{10, 0};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

AgentConnection::~AgentConnection() {
    close();
    if (reader_.joinable()) {
        // The reader holds a reference to us, so the last one may be
        // released on the reader thread itself, after its loop ended.
        if (reader_.get_id() == std::this_thread::get_id()) reader_.detach();
        else reader_.join();
    }
    failAll("agent connection closed");
}

void AgentConnection::close() {
    alive_ = false;
    std::uint64_t one = 1;
    (void)!::write(wakeFd_.get(), &one, sizeof one);
}

std::shared_ptr<AgentConnection> AgentConnection::connect(const std::string& endpoint,
                                                          std::chrono::milliseconds timeout) {
    return connectAgent(endpoint, timeout);
}

std::shared_ptr<AgentConnection> AgentConnection::fromFd(UniqueFd fd, std::chrono::milliseconds timeout) {
    std::shared_ptr<AgentConnection> conn(new AgentConnection(std::move(fd)));
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
            sendFrame(FrameType::hello, 0, protocol::toJson(protocol::Hello{protocol::kProtocolVersion, nonce}));
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
    // The reader keeps the connection alive until close() or the socket's end.
    reader_ = std::thread([self = shared_from_this()] { self->readerLoop(); });
}

void AgentConnection::sendFrame(FrameType type, std::uint32_t stream, const std::string& payload, std::uint8_t flags) {
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
        if (fds[1].revents) break;  // close()
        ssize_t n = ::read(fd_.get(), buf.data(), buf.size());
        if (n <= 0) {
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            failAll("agent channel closed (guest gone or agent restarted)");
            break;
        }
        std::string_view incoming(buf.data(), static_cast<std::size_t>(n));
        incoming.remove_prefix(consumeRaw(incoming));
        decoder_.feed(incoming);
        protocol::Frame frame;
        while (true) {
            auto r = decoder_.next(frame);
            if (r == protocol::FrameDecoder::Result::need_more) break;
            if (r == protocol::FrameDecoder::Result::error) {
                logWarn("agentclient", "protocol error from agent: " + decoder_.lastError());
                failAll("protocol error from agent: " + decoder_.lastError());
                return;
            }
            bool leavesFraming = frame.type == FrameType::control && frame.stream != 0 && frame.stream == rawStream_;
            try {
                dispatch(frame);
            } catch (const std::exception& e) {
                logWarn("agentclient", std::string("dropping connection: ") + e.what());
                failAll(e.what());
                return;
            }
            if (leavesFraming) {
                // The agent's raw bytes follow this frame at once.
                {
                    std::lock_guard lock(rawMutex_);
                    rawActive_ = true;
                }
                std::string rest = decoder_.takeBuffered();
                std::string_view view(rest);
                view.remove_prefix(consumeRaw(view));
                decoder_.feed(view);
            }
        }
    }
    failAll("agent connection closed");
}

void AgentConnection::failAll(const std::string& why) {
    alive_ = false;
    std::map<std::uint32_t, std::weak_ptr<AgentStream>> streams;
    {
        std::lock_guard lock(streamsMutex_);
        if (failure_.empty()) failure_ = why;
        streams.swap(streams_);
    }
    for (auto& [id, weak] : streams)
        if (auto s = weak.lock())
            s->deliver({AgentStream::Event::Kind::reset, 0, protocol::toJson(protocol::ResetInfo{"connection_lost", why})});
    pingCv_.notify_all();
}

void AgentConnection::forget(std::uint32_t stream) {
    std::lock_guard lock(streamsMutex_);
    streams_.erase(stream);
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
            failAll("the agent reset the session (" + info.code + ": " + info.message + ")");
        }
        return;  // a late hello_ack and the like
    }
    std::shared_ptr<AgentStream> stream;
    {
        std::lock_guard lock(streamsMutex_);
        auto it = streams_.find(frame.stream);
        if (it != streams_.end()) stream = it->second.lock();
        if (stream && (frame.type == FrameType::close || frame.type == FrameType::reset)) streams_.erase(it);
    }
    if (!stream) return;  // a cancelled stream's stragglers
    using Kind = AgentStream::Event::Kind;
    switch (frame.type) {
        case FrameType::window: {
            std::uint32_t credit = 0;
            if (protocol::decodeWindowPayload(frame.payload, credit)) stream->addSendCredit(credit);
            return;
        }
        case FrameType::data: return stream->deliver({Kind::data, frame.flags, frame.payload});
        case FrameType::control: return stream->deliver({Kind::control, 0, frame.payload});
        case FrameType::close: return stream->deliver({Kind::close, 0, frame.payload});
        case FrameType::reset: return stream->deliver({Kind::reset, 0, frame.payload});
        default: return;
    }
}

std::shared_ptr<AgentStream> AgentConnection::open(const nlohmann::json& request, AgentStream::Handler handler) {
    std::shared_ptr<AgentStream> stream;
    {
        std::lock_guard lock(streamsMutex_);
        if (!alive_) throw Error(ErrorCode::agent_error, "agent connection is down: " + failure_);
        std::uint32_t id = nextStream_++;
        stream = std::make_shared<AgentStream>(id, weak_from_this(), std::move(handler));
        streams_[id] = stream;
    }
    sendFrame(FrameType::open, stream->id(), request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return stream;
}

namespace {
[[noreturn]] void throwReset(const std::string& payload) {
    auto info = protocol::parseResetInfo(payload);
    throw agentError(info.code, info.message.empty() ? info.code : info.message);
}
}  // namespace

nlohmann::json AgentConnection::call(const nlohmann::json& request, std::chrono::milliseconds wait) {
    auto stream = open(request);
    auto deadline = AgentStream::Clock::now() + wait;
    while (auto e = stream->next(deadline)) {
        if (e->kind == AgentStream::Event::Kind::reset) throwReset(e->payload);
        if (e->kind == AgentStream::Event::Kind::close) {
            auto j = nlohmann::json::parse(e->payload, nullptr, false);
            if (j.is_discarded()) throw Error(ErrorCode::agent_error, "agent sent a malformed result");
            return j;
        }
    }
    throw Error(ErrorCode::agent_timeout, "the agent did not answer in time");
}

ExecOutput AgentConnection::exec(const protocol::ExecRequest& requestIn, std::size_t outputCap,
                                 std::chrono::milliseconds wait) {
    protocol::ExecRequest request = requestIn;
    request.output_cap = outputCap;
    auto started = steadyMillis();
    auto stream = open(nlohmann::json::parse(protocol::toJson(request)));
    auto deadline = AgentStream::Clock::now() + wait;
    ExecOutput out;
    while (true) {
        auto e = stream->next(deadline);
        if (!e) {
            stream->reset("cancelled", "host timeout");
            throw Error(ErrorCode::agent_timeout, "the agent did not finish the command in time");
        }
        using Kind = AgentStream::Event::Kind;
        if (e->kind == Kind::data) {
            // The agent enforces the cap; this guards against one that does not.
            auto& buf = e->channel == 2 ? out.stderrData : out.stdoutData;
            std::size_t room = outputCap > buf.size() ? outputCap - buf.size() : 0;
            if (e->payload.size() > room) out.truncated = true;
            buf.append(e->payload, 0, std::min(room, e->payload.size()));
        } else if (e->kind == Kind::reset) {
            throwReset(e->payload);
        } else if (e->kind == Kind::close) {
            try {
                out.result = protocol::parseExecResult(e->payload);
            } catch (const protocol::MessageError& m) {
                throw Error(ErrorCode::agent_error, m.message);
            }
            out.truncated = out.truncated || out.result.truncated;
            out.durationMs = steadyMillis() - started;
            return out;
        }
    }
}

std::size_t AgentConnection::consumeRaw(std::string_view bytes) {
    std::lock_guard lock(rawMutex_);
    if (!rawActive_ || rawReceived_ >= rawExpected_) return 0;
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(rawExpected_ - rawReceived_, bytes.size()));
    rawReceived_ += n;
    if (rawReceived_ == rawExpected_) rawActive_ = false;
    rawCv_.notify_all();
    return n;
}

std::vector<std::chrono::nanoseconds> AgentConnection::rawBench(const std::string& mode, std::uint64_t bytes,
                                                               std::chrono::milliseconds wait) {
    using Clock = std::chrono::steady_clock;
    auto deadline = Clock::now() + wait;
    bool agentSends = mode == "source" || mode == "echo";
    std::shared_ptr<AgentStream> stream;
    {
        std::lock_guard lock(rawMutex_);
        rawExpected_ = agentSends ? bytes : 0;
        rawReceived_ = 0;
        rawActive_ = false;
        std::lock_guard streams(streamsMutex_);
        rawStream_ = nextStream_;  // the id open() will use
    }
    stream = open({{"op", "raw"}, {"mode", mode}, {"bytes", bytes}});
    auto ready = stream->next(deadline);
    if (!ready || ready->kind != AgentStream::Event::Kind::control)
        throw Error(ErrorCode::agent_error, "the agent did not enter raw mode");
    std::vector<std::chrono::nanoseconds> times;
    auto writeRaw = [&](std::string_view data) {
        std::lock_guard lock(writeMutex_);
        while (!data.empty()) {
            ssize_t n = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
            if (n <= 0) throw Error(ErrorCode::agent_error, "raw write failed");
            data.remove_prefix(static_cast<std::size_t>(n));
        }
    };
    auto waitReceived = [&](std::uint64_t count) {
        std::unique_lock lock(rawMutex_);
        if (!rawCv_.wait_until(lock, deadline, [&] { return rawReceived_ >= count; }))
            throw Error(ErrorCode::agent_timeout, "raw transfer timed out");
    };
    auto start = Clock::now();
    if (mode == "sink") {
        std::string block(256 * 1024, 's');
        for (std::uint64_t sent = 0; sent < bytes;) {
            std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(block.size(), bytes - sent));
            writeRaw(std::string_view(block).substr(0, n));
            sent += n;
        }
    } else if (mode == "source") {
        waitReceived(bytes);
    } else {
        for (std::uint64_t i = 1; i <= bytes; ++i) {
            auto t0 = Clock::now();
            writeRaw("e");
            waitReceived(i);
            times.push_back(Clock::now() - t0);
        }
    }
    // The agent's close marks the end (for a sink: all bytes arrived).
    while (auto e = stream->next(deadline)) {
        if (e->kind == AgentStream::Event::Kind::close) break;
        if (e->kind == AgentStream::Event::Kind::reset) throw Error(ErrorCode::agent_error, "raw mode failed");
    }
    if (mode != "echo") times.push_back(Clock::now() - start);
    std::lock_guard lock(streamsMutex_);
    rawStream_ = 0;
    return times;
}

bool AgentConnection::ping(std::chrono::milliseconds wait) {
    std::unique_lock lock(pingMutex_);
    std::uint64_t before = pongsSeen_;
    lock.unlock();
    try {
        sendFrame(FrameType::ping, 0, "");
    } catch (const Error&) {
        return false;
    }
    lock.lock();
    return pingCv_.wait_for(lock, wait, [&] { return pongsSeen_ > before || !alive_; }) && alive_;
}

}  // namespace airlock

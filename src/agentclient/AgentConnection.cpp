#include "agentclient/AgentConnection.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agentclient/AgentProtocolError.hpp"
#include "agentclient/AgentTransport.hpp"
#include "core/AwaitedResult.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"
#include "protocol/Frame.hpp"
#include "protocol/JsonText.hpp"
#include "protocol/Ops.hpp"

namespace airlock {
namespace {
using protocol::FrameType;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kReadChunk = 64 * 1024;
// stdin up to this size travels inside the open frame; more is streamed.
constexpr std::size_t kInlineStdinMax = 64 * 1024;
// The host's own reset code for a sandbox it removes (close(why)); never the guest's.
constexpr const char* kSandboxGone = "sandbox_gone";

}  // namespace

Error agentError(const std::string& code, const std::string& message) {
    if (code == "not_found") return Error(ErrorCode::not_found, message);
    if (code == "conflict" || code == "no_space" || code == kSandboxGone)
        return Error(ErrorCode::conflict, message);
    if (code == "permission_denied") return Error(ErrorCode::forbidden, message);
    if (code == "bad_request") return Error(ErrorCode::bad_request, message);
    if (code == "busy") return Error(ErrorCode::unavailable, message);
    if (code == "too_large") return Error(ErrorCode::payload_too_large, message);
    return Error(ErrorCode::agent_error, message.empty() ? code : message);
}

void PendingExec::hold(std::shared_ptr<AgentStream> stream) {
    std::lock_guard lock(holdMutex_);
    stream_ = stream;
    if (!ended_.load()) streamHold_ = std::move(stream);
}

std::shared_ptr<AgentStream> PendingExec::stream() {
    std::lock_guard lock(holdMutex_);
    return stream_.lock();
}

void PendingExec::finish(std::optional<ExecOutput> out, std::exception_ptr error) {
    if (ended_.exchange(true)) return;
    std::shared_ptr<AgentStream> release;
    {
        std::lock_guard lock(holdMutex_);
        release = std::move(streamHold_);
    }
    auto done = std::move(done_);
    done_ = nullptr;
    if (done) {
        try {
            done(std::move(out), error);
        } catch (...) {
            // The caller's completion must not end the agent connection.
        }
    }
}

void PendingExec::cancel(const Error& error) {
    if (ended_.load()) return;
    if (auto s = stream()) {
        try {
            s->reset("cancelled", error.what());
        } catch (const std::exception&) {
        }
    }
    finish(std::nullopt, std::make_exception_ptr(error));
}

AgentConnection::AgentConnection(UniqueFd fd, AgentChannelLimits limits)
    : fd_(std::move(fd)), limits_(limits) {
    touch();
    wakeFd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    // Never block on the guest: frames wait in our bounded queue instead.
    int flags = ::fcntl(fd_.get(), F_GETFL);
    if (flags >= 0) ::fcntl(fd_.get(), F_SETFL, flags | O_NONBLOCK);
}

AgentConnection::~AgentConnection() {
    close();
    std::lock_guard lock(joinMutex_);
    if (thread_.joinable()) {
        // The thread holds a reference to us, so the last one may be
        // released on that thread itself, after its loop ended.
        if (thread_.get_id() == std::this_thread::get_id())
            thread_.detach();
        else
            thread_.join();
    }
    failAll("agent connection closed");
}

void AgentConnection::close(const std::string& why) {
    if (!why.empty()) {
        std::lock_guard lock(streamsMutex_);
        if (closeReason_.empty()) closeReason_ = why;
    }
    alive_ = false;
    wake();
    queueCv_.notify_all();
}

void AgentConnection::closeAndWait() {
    close();
    std::lock_guard lock(joinMutex_);
    if (thread_.joinable() && thread_.get_id() == std::this_thread::get_id()) return;
    if (thread_.joinable()) thread_.join();
    // Nothing reads or writes the channel any more: it is free for the next
    // host at once (a virtio-serial chardev takes one at a time), not only
    // when the last holder of this object lets go.
    fd_.reset();
}

void AgentConnection::wake() {
    std::uint64_t one = 1;
    (void)!::write(wakeFd_.get(), &one, sizeof one);
}

std::string AgentConnection::failure() const {
    std::lock_guard lock(streamsMutex_);
    return failure_;
}

std::size_t AgentConnection::queuedBytes() const {
    std::lock_guard lock(queueMutex_);
    return queueBytes_;
}

void AgentConnection::onProtocolError(ProtocolErrorHandler handler) {
    std::lock_guard lock(handlerMutex_);
    protocolErrorHandler_ = std::move(handler);
}

std::shared_ptr<AgentConnection> AgentConnection::connect(const std::string& endpoint,
                                                          std::chrono::milliseconds timeout) {
    return connectAgent(endpoint, timeout);
}

std::shared_ptr<AgentConnection> AgentConnection::fromFd(UniqueFd fd,
                                                         std::chrono::milliseconds timeout,
                                                         AgentChannelLimits limits) {
    std::shared_ptr<AgentConnection> conn(new AgentConnection(std::move(fd), limits));
    conn->handshake(timeout);
    conn->startThread();
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
    std::size_t readBytes = 0;
    char buf[kReadChunk];
    while (Clock::now() < deadline) {
        if (Clock::now() >= nextHello) {
            nonce = newSecretToken().substr(0, 24);
            {
                // Stale hellos nobody took are dropped: only the newest counts.
                std::lock_guard lock(queueMutex_);
                if (queueOffset_ == 0) {
                    queue_.clear();
                    queueBytes_ = 0;
                }
            }
            sendFrame(FrameType::hello, 0,
                      protocol::toJson(protocol::Hello{protocol::kProtocolVersion, nonce}));
            nextHello = Clock::now() + std::chrono::milliseconds(500);
        }
        auto until = std::min(deadline, nextHello);
        auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
        pollfd p{fd_.get(), static_cast<short>(POLLIN | (queuedBytes() ? POLLOUT : 0)), 0};
        int r = ::poll(&p, 1, static_cast<int>(std::max<long>(left, 0)));
        if (r <= 0) continue;
        if (p.revents & POLLOUT) {
            if (!flush())
                throw Error(ErrorCode::agent_error, "agent channel closed during the handshake");
        }
        if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = ::read(fd_.get(), buf, sizeof buf);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0)
            throw Error(ErrorCode::agent_error, "agent channel closed during the handshake");
        readBytes += static_cast<std::size_t>(n);
        decoder_.feed(std::string_view(buf, static_cast<std::size_t>(n)));
        protocol::Frame frame;
        while (decoder_.next(frame) == protocol::FrameDecoder::Result::frame) {
            if (frame.type == FrameType::reset && frame.stream == 0) {
                auto info = protocol::parseResetInfo(frame.payload);
                if (info.code == "version_mismatch")
                    throw Error(ErrorCode::agent_error,
                                "agent refused the protocol version: " + info.message);
                continue;
            }
            if (frame.type != FrameType::hello_ack) continue;
            protocol::HelloAck ack;
            try {
                ack = protocol::parseHelloAck(frame.payload);
            } catch (const protocol::MessageError&) {
                continue;
            }
            if (ack.nonce != nonce) continue;
            if (ack.version != protocol::kProtocolVersion)
                throw Error(ErrorCode::agent_error,
                            "agent speaks protocol version " + std::to_string(ack.version));
            epoch_ = ack.epoch;
            agentVersion_ = ack.agent.substr(0, 128);
            decoder_.setResync(false);
            return;
        }
        // Judged after the chunk's frames: an answer in the chunk that
        // crossed the bound still counts.
        if (readBytes > limits_.handshakeBytes)
            throw AgentProtocolError("the agent sent " + std::to_string(readBytes) +
                                     " bytes without answering its hello");
    }
    throw Error(ErrorCode::agent_timeout, "the guest agent did not answer its hello in time");
}

void AgentConnection::startThread() {
    // The thread keeps the connection alive until close() or the socket's end.
    thread_ = std::thread([self = shared_from_this()] { self->run(); });
}

void AgentConnection::enqueue(std::string bytes, bool isData) {
    {
        std::lock_guard lock(queueMutex_);
        if (!alive_) throw Error(ErrorCode::agent_error, "the agent connection is down");
        if (!isData && queueBytes_ + bytes.size() > limits_.queueHardBytes) {
            // Only control frames get past the data budget: the guest has not
            // read its channel for megabytes. End the session, not the host.
            alive_ = false;
        } else {
            queueBytes_ += bytes.size();
            queue_.push_back(std::move(bytes));
        }
    }
    if (!alive_) {
        wake();
        throw Error(ErrorCode::agent_error, "the guest stopped reading its agent channel");
    }
    wake();
}

void AgentConnection::sendFrame(FrameType type, std::uint32_t stream, const std::string& payload,
                                std::uint8_t flags) {
    enqueue(protocol::encodeFrame(type, stream, payload, flags), false);
}

bool AgentConnection::trySendData(std::uint32_t stream, std::string_view payload,
                                  std::uint8_t channel) {
    {
        std::lock_guard lock(queueMutex_);
        if (alive_ && queueBytes_ >= limits_.dataQueueBytes) return false;
    }
    enqueue(protocol::encodeFrame(FrameType::data, stream, payload, channel), true);
    return true;
}

void AgentConnection::sendData(std::uint32_t stream, std::string_view payload, std::uint8_t channel,
                               std::chrono::steady_clock::time_point deadline) {
    {
        std::unique_lock lock(queueMutex_);
        if (!queueCv_.wait_until(lock, deadline,
                                 [&] { return !alive_ || queueBytes_ < limits_.dataQueueBytes; }))
            throw Error(ErrorCode::agent_timeout, "the agent stopped reading its channel");
    }
    enqueue(protocol::encodeFrame(FrameType::data, stream, payload, channel), true);
}

bool AgentConnection::flush() {
    std::unique_lock lock(queueMutex_);
    bool drainedSome = false;
    while (!queue_.empty()) {
        const std::string& front = queue_.front();
        ssize_t n = ::send(fd_.get(), front.data() + queueOffset_, front.size() - queueOffset_,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            return false;
        }
        queueOffset_ += static_cast<std::size_t>(n);
        queueBytes_ -= static_cast<std::size_t>(n);
        drainedSome = true;
        if (queueOffset_ == front.size()) {
            queue_.pop_front();
            queueOffset_ = 0;
        }
    }
    bool room = queueBytes_ < limits_.dataQueueBytes;
    lock.unlock();
    if (drainedSome && room) {
        queueCv_.notify_all();
        notifyDrained();
    }
    return true;
}

void AgentConnection::notifyDrained() {
    std::vector<std::shared_ptr<AgentStream>> waiting;
    {
        std::lock_guard lock(streamsMutex_);
        for (auto& [id, weak] : streams_)
            if (auto s = weak.lock()) waiting.push_back(std::move(s));
    }
    for (auto& s : waiting)
        if (s->wantsPump()) s->pump();
}

void AgentConnection::run() {
    // The thread's entry point: nothing may escape it.
    try {
        loop();
    } catch (const std::exception& e) {
        logError("agentclient", std::string("agent connection thread: ") + e.what());
    } catch (...) {
        logError("agentclient", "agent connection thread: unknown exception");
    }
    failAll("agent connection closed");
    queueCv_.notify_all();
}

void AgentConnection::loop() {
    std::string buf(kReadChunk, '\0');
    while (alive_) {
        short events = POLLIN;
        if (queuedBytes() > 0) events |= POLLOUT;
        pollfd fds[2] = {{fd_.get(), events, 0}, {wakeFd_.get(), POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (fds[1].revents) {
            std::uint64_t count;
            (void)!::read(wakeFd_.get(), &count, sizeof count);
            if (!alive_) break;  // close()
        }
        if (fds[0].revents & POLLOUT) {
            if (!flush()) {
                failAll("agent channel write failed (guest gone)");
                break;
            }
        }
        if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = ::read(fd_.get(), buf.data(), buf.size());
        if (n <= 0) {
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            failAll("agent channel closed (guest gone or agent restarted)");
            break;
        }
        onBytes(std::string_view(buf.data(), static_cast<std::size_t>(n)));
    }
}

void AgentConnection::onBytes(std::string_view incoming) {
    decoder_.feed(incoming);
    protocol::Frame frame;
    while (alive_) {
        auto r = decoder_.next(frame);
        if (r == protocol::FrameDecoder::Result::need_more) break;
        if (r == protocol::FrameDecoder::Result::error)
            return protocolError("bad framing: " + decoder_.lastError());
        dispatch(frame);
    }
}

void AgentConnection::protocolError(const std::string& why) {
    logWarn("agentclient", "agent protocol error, ending the session: " + why);
    ProtocolErrorHandler handler;
    {
        std::lock_guard lock(handlerMutex_);
        handler = std::move(protocolErrorHandler_);
        protocolErrorHandler_ = nullptr;
    }
    // Tell the agent why (it may be a confused honest one), then end.
    try {
        sendFrame(FrameType::reset, 0,
                  protocol::toJson(protocol::ResetInfo{"protocol_error", why}));
        flush();
    } catch (const std::exception&) {
    }
    failAll("protocol error from the agent: " + why);
    if (handler) {
        try {
            handler(why, true);
        } catch (...) {
        }
    }
}

void AgentConnection::failAll(const std::string& why) {
    alive_ = false;
    std::map<std::uint32_t, std::weak_ptr<AgentStream>> streams;
    protocol::ResetInfo reset{"connection_lost", why};
    {
        std::lock_guard lock(streamsMutex_);
        // The host ended the session on purpose: that is the reason, whatever
        // the channel did after it (EOF once the VM is destroyed).
        if (!closeReason_.empty()) reset = {kSandboxGone, closeReason_};
        if (failure_.empty()) failure_ = reset.message;
        streams.swap(streams_);
        serviceStreams_.clear();
    }
    for (auto& [id, weak] : streams)
        if (auto s = weak.lock())
            s->deliver({AgentStream::Event::Kind::reset, 0, protocol::toJson(reset)});
    pingCv_.notify_all();
    queueCv_.notify_all();
}

void AgentConnection::forget(std::uint32_t stream) {
    std::lock_guard lock(streamsMutex_);
    streams_.erase(stream);
    serviceStreams_.erase(stream);
}

void AgentConnection::dispatch(const protocol::Frame& frame) {
    // Every frame the guest can send is judged here; anything the protocol
    // does not allow ends the session (a straggler of a stream we already
    // ended is allowed: the agent may have sent it before our reset arrived).
    switch (frame.type) {
        case FrameType::hello:
        case FrameType::open:
        case FrameType::ping:
            return protocolError("the agent sent a host-only frame (type " +
                                 std::to_string(static_cast<int>(frame.type)) + ")");
        case FrameType::pong: {
            std::lock_guard lock(pingMutex_);
            ++pongsSeen_;
            pingCv_.notify_all();
            return;
        }
        case FrameType::hello_ack:
            // A late answer to an earlier hello of this handshake is harmless;
            // on a stream it is not.
            if (frame.stream != 0)
                return protocolError("hello_ack on stream " + std::to_string(frame.stream));
            return;
        default:
            break;
    }
    if (frame.stream == 0) {
        if (frame.type == FrameType::reset) {
            auto info = protocol::parseResetInfo(frame.payload);
            if (info.code == "malformed")
                return protocolError("a session reset that is not a JSON object");
            failAll("the agent reset the session (" + info.code + ": " + info.message + ")");
            return;
        }
        return protocolError("frame type " + std::to_string(static_cast<int>(frame.type)) +
                             " on stream 0");
    }
    std::shared_ptr<AgentStream> stream;
    {
        std::lock_guard lock(streamsMutex_);
        if (frame.stream >= nextStream_) {
            // Never opened: the host allocates stream ids.
            stream = nullptr;
        } else {
            auto it = streams_.find(frame.stream);
            if (it != streams_.end()) stream = it->second.lock();
            if (stream && (frame.type == FrameType::close || frame.type == FrameType::reset)) {
                streams_.erase(it);
                serviceStreams_.erase(frame.stream);
            } else if (stream && frame.type == FrameType::data &&
                       !serviceStreams_.count(frame.stream)) {
                touch();
            }
            if (!stream) return;  // an ended stream's stragglers
        }
    }
    if (!stream)
        return protocolError("frame on stream " + std::to_string(frame.stream) +
                             ", which was never opened");
    using Kind = AgentStream::Event::Kind;
    bool ok = true;
    switch (frame.type) {
        case FrameType::window: {
            std::uint32_t credit = 0;
            if (!protocol::decodeWindowPayload(frame.payload, credit))
                return protocolError("window payload of " + std::to_string(frame.payload.size()) +
                                     " bytes");
            stream->addSendCredit(credit);
            return;
        }
        case FrameType::data:
            if (frame.flags > 2)
                return protocolError("data on channel " + std::to_string(frame.flags));
            ok = stream->deliver({Kind::data, frame.flags, frame.payload});
            break;
        case FrameType::control:
            ok = stream->deliver({Kind::control, 0, frame.payload});
            break;
        case FrameType::close:
            ok = stream->deliver({Kind::close, 0, frame.payload});
            break;
        case FrameType::reset: {
            // Read once here, so every consumer gets {code, message} as
            // strings; a guest that claims the host's own code is an agent error.
            auto info = protocol::parseResetInfo(frame.payload);
            if (info.code == kSandboxGone) info.code = "agent_error";
            ok = stream->deliver({Kind::reset, 0, protocol::toJson(info)});
            break;
        }
        default:
            return protocolError("unexpected frame type " +
                                 std::to_string(static_cast<int>(frame.type)));
    }
    if (!ok) {
        // The stream was reset on both sides; the session goes on.
        forget(frame.stream);
        logWarn("agentclient", "stream " + std::to_string(frame.stream) +
                                   " reset: the agent broke its flow control");
        std::lock_guard lock(handlerMutex_);
        if (protocolErrorHandler_) {
            try {
                protocolErrorHandler_(
                    "flow control broken on stream " + std::to_string(frame.stream), false);
            } catch (...) {
            }
        }
    }
}

namespace {
// The channel's own streams (the egress listener, usage samples, file
// watchers), which are not a caller's activity.
bool isServiceOp(std::string_view op) {
    return op == "egress_listen" || op == "usage" || op == "file_watch" || op == "file_activity";
}
bool isServiceRequest(const protocol::GuestRequest& request) {
    if (std::holds_alternative<protocol::UsageRequest>(request) ||
        std::holds_alternative<protocol::FileWatchRequest>(request))
        return true;
    auto port = std::get_if<protocol::PortRequest>(&request);
    return port && port->op == protocol::Op::egress_listen;
}
}  // namespace

std::shared_ptr<AgentStream> AgentConnection::open(const protocol::GuestRequest& request,
                                                   AgentStream::Handler handler, bool autoGrant) {
    return openPayload(protocol::toJson(request), std::move(handler), autoGrant,
                       isServiceRequest(request));
}

std::shared_ptr<AgentStream> AgentConnection::open(const nlohmann::json& request,
                                                   AgentStream::Handler handler, bool autoGrant) {
    // Only the operations both sides know (protocol/Ops.hpp) go out.
    auto op = request.find("op");
    if (op == request.end() || !op->is_string() ||
        !protocol::parseOp(op->get_ref<const std::string&>()))
        throw Error(ErrorCode::internal,
                    "not an agent operation: " + (op != request.end() && op->is_string()
                                                      ? op->get<std::string>().substr(0, 64)
                                                      : std::string("(none)")));
    return openPayload(jsonText(request), std::move(handler), autoGrant,
                       isServiceOp(op->get_ref<const std::string&>()));
}

AgentConnection::Activity AgentConnection::activity() const {
    Activity a;
    a.lastTrafficMs = lastTrafficMs_.load();
    std::lock_guard lock(streamsMutex_);
    for (const auto& [id, weak] : streams_)
        if (!serviceStreams_.count(id) && !weak.expired()) ++a.openStreams;
    return a;
}

void AgentConnection::touch() { lastTrafficMs_.store(steadyMillis()); }

std::shared_ptr<AgentStream> AgentConnection::openPayload(const std::string& payload,
                                                          AgentStream::Handler handler,
                                                          bool autoGrant, bool service) {
    std::shared_ptr<AgentStream> stream;
    {
        std::lock_guard lock(streamsMutex_);
        if (!closeReason_.empty()) throw agentError(kSandboxGone, closeReason_);
        if (!alive_) throw Error(ErrorCode::agent_error, "the agent connection is down");
        if (streams_.size() >= limits_.maxStreams)
            throw Error(ErrorCode::unavailable, "this sandbox has " +
                                                    std::to_string(streams_.size()) +
                                                    " agent streams open; try again when some end");
        std::uint32_t id = nextStream_++;
        stream = std::make_shared<AgentStream>(id, weak_from_this(), std::move(handler), autoGrant);
        streams_[id] = stream;
        if (service)
            serviceStreams_.insert(id);
        else
            touch();
    }
    try {
        sendFrame(FrameType::open, stream->id(), payload);
    } catch (...) {
        forget(stream->id());
        throw;
    }
    return stream;
}

namespace {
[[noreturn]] void throwReset(const std::string& payload) {
    auto info = protocol::parseResetInfo(payload);
    throw agentError(info.code, info.message.empty() ? info.code : info.message);
}
}  // namespace

nlohmann::json AgentConnection::call(const protocol::GuestRequest& request,
                                     std::chrono::milliseconds wait) {
    return awaitClose(open(request), wait);
}

nlohmann::json AgentConnection::call(const nlohmann::json& request,
                                     std::chrono::milliseconds wait) {
    return awaitClose(open(request), wait);
}

nlohmann::json AgentConnection::awaitClose(const std::shared_ptr<AgentStream>& stream,
                                           std::chrono::milliseconds wait) {
    auto deadline = AgentStream::Clock::now() + wait;
    while (auto e = stream->next(deadline)) {
        if (e->kind == AgentStream::Event::Kind::reset) throwReset(e->payload);
        if (e->kind == AgentStream::Event::Kind::close) {
            auto j = nlohmann::json::parse(e->payload, nullptr, false);
            if (!j.is_object())
                throw Error(ErrorCode::agent_error, "agent sent a malformed result");
            return j;
        }
    }
    stream->reset("cancelled", "host timeout");
    throw Error(ErrorCode::agent_timeout, "the agent did not answer in time");
}

std::shared_ptr<PendingExec> AgentConnection::execAsync(const protocol::ExecRequest& requestIn,
                                                        std::size_t outputCap,
                                                        PendingExec::Done done) {
    protocol::ExecRequest request = requestIn;
    request.output_cap = outputCap;
    // stdin rides inside the open frame only while it fits comfortably;
    // more streams as data under the agent's window.
    std::string streamedStdin;
    if (request.stdin_data.size() > kInlineStdinMax && !request.stdin_stream) {
        streamedStdin = std::move(request.stdin_data);
        request.stdin_data.clear();
        request.stdin_stream = true;
    }
    auto pending = std::make_shared<PendingExec>();
    pending->done_ = std::move(done);
    pending->outputCap_ = outputCap;
    pending->startedMs_ = steadyMillis();
    // The handler runs on this connection's thread; it only appends to
    // buffers bounded by the cap and grants the window back at once.
    auto handler = [p = pending](AgentStream::Event&& e) {
        if (p->ended()) return;
        using Kind = AgentStream::Event::Kind;
        if (e.kind == Kind::data) {
            auto& buf = e.channel == 2 ? p->out_.stderrData : p->out_.stdoutData;
            std::size_t room = p->outputCap_ > buf.size() ? p->outputCap_ - buf.size() : 0;
            if (e.payload.size() > room) p->out_.truncated = true;
            buf.append(e.payload, 0, std::min(room, e.payload.size()));
        } else if (e.kind == Kind::reset) {
            auto info = protocol::parseResetInfo(e.payload);
            p->finish(std::nullopt,
                      std::make_exception_ptr(
                          agentError(info.code, info.message.empty() ? info.code : info.message)));
        } else if (e.kind == Kind::close) {
            try {
                p->out_.result = protocol::parseExecResult(e.payload);
            } catch (const protocol::MessageError& m) {
                p->finish(std::nullopt,
                          std::make_exception_ptr(Error(ErrorCode::agent_error, m.message)));
                return;
            }
            p->out_.result.error = p->out_.result.error.substr(0, 4096);
            p->out_.truncated = p->out_.truncated || p->out_.result.truncated;
            p->out_.durationMs = steadyMillis() - p->startedMs_;
            p->finish(std::move(p->out_), nullptr);
        }
    };
    // The exec holds its stream until it ends and the stream's handler holds
    // the exec: the cycle ends in finish(), which every path reaches (close,
    // reset, a lost connection, cancel()).
    auto stream = open(request, handler, true);
    pending->hold(stream);
    if (!streamedStdin.empty())
        stream->writeAsync(0, std::move(streamedStdin), true);
    else if (request.stdin_stream)
        stream->closeWrite();
    return pending;
}

ExecOutput AgentConnection::exec(const protocol::ExecRequest& request, std::size_t outputCap,
                                 std::chrono::milliseconds wait) {
    AwaitedResult<ExecOutput> result;
    auto pending = execAsync(request, outputCap, result.callback());
    // Past the wait it is cancelled; whoever ends it (the cancel or a result
    // that just won) completes the result.
    if (!result.waitFor(wait))
        pending->cancel(
            Error(ErrorCode::agent_timeout, "the agent did not finish the command in time"));
    return result.get();
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

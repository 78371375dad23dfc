#include "agent/Agent.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "protocol/Messages.hpp"

namespace airlock::guest {
namespace {
using protocol::FrameType;

std::int64_t nowMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void agentLog(const std::string& msg) { std::fprintf(stderr, "airlock-agent: %s\n", msg.c_str()); }

constexpr std::size_t kReadChunk = 64 * 1024;
// Stop reading child output while this much is waiting for the host: output
// then backs up into the pipes and the commands block, memory stays bounded.
constexpr std::size_t kOutputHighWater = 2 * 1024 * 1024;
}  // namespace

Agent::Agent(std::string portName) : portName_(std::move(portName)) {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &mask, nullptr);
    signalFd_.reset(::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
    ::signal(SIGPIPE, SIG_IGN);
    decoder_.setResync(true);
    stopFd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
}

Agent::Agent(UniqueFd connectedPort) : Agent(std::string()) { port_.adopt(std::move(connectedPort)); }

void Agent::stop() {
    std::uint64_t one = 1;
    (void)!::write(stopFd_.get(), &one, sizeof one);
}

bool Agent::openPort() {
    if (port_.fd() >= 0) return true;
    // The port appears once virtio_console is loaded; wait for it.
    for (int attempt = 0; attempt < 600; ++attempt) {
        std::string dev = PortChannel::findPortDevice(portName_);
        if (!dev.empty() && port_.open(dev)) {
            agentLog("serving on " + dev);
            return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

int Agent::run() {
    if (!openPort()) {
        agentLog("no virtio port named " + portName_);
        return 1;
    }
    // Tell a host that may be waiting on the previous agent instance (killed,
    // restarted by init) that its streams are gone; it reconnects with a hello.
    port_.enqueue(protocol::encodeFrame(FrameType::reset, 0,
                                        protocol::toJson(protocol::ResetInfo{"agent_started", "the agent (re)started"})));
    while (!stopping_) pollOnce();
    return 0;
}

void Agent::sendFrame(FrameType type, std::uint32_t stream, const std::string& payload, std::uint8_t flags) {
    // Only what belongs to the current host session is worth queueing.
    if (!sessionOpen_ && type != FrameType::hello_ack && type != FrameType::reset) return;
    if (!port_.enqueue(protocol::encodeFrame(type, stream, payload, flags)))
        agentLog("output queue full, dropping a frame");
}

void Agent::sendReset(std::uint32_t stream, const std::string& code, const std::string& message) {
    sendFrame(FrameType::reset, stream, protocol::toJson(protocol::ResetInfo{code, message}));
}

void Agent::pollOnce() {
    std::vector<pollfd> fds;
    std::vector<std::pair<ExecSession*, int>> owners;  // parallel to fds[kFixed..]
    constexpr std::size_t kFixed = 3;
    short portEvents = POLLIN;
    if (port_.queued() > 0) portEvents |= POLLOUT;
    fds.push_back({port_.fd(), portEvents, 0});
    fds.push_back({signalFd_.get(), POLLIN, 0});
    fds.push_back({stopFd_.get(), POLLIN, 0});
    bool outputRoom = port_.queued() < kOutputHighWater && sessionOpen_;
    std::int64_t now = nowMs();
    int timeout = !hostConnected_ ? 100 : sessions_.empty() ? 1000 : 100;
    for (auto& [id, s] : sessions_) {
        if (outputRoom && s->credit() > 0) {
            if (s->stdoutFd() >= 0) {
                fds.push_back({s->stdoutFd(), POLLIN, 0});
                owners.push_back({s.get(), s->stdoutFd()});
            }
            if (s->stderrFd() >= 0) {
                fds.push_back({s->stderrFd(), POLLIN, 0});
                owners.push_back({s.get(), s->stderrFd()});
            }
        }
        if (s->wantsStdinWrite()) {
            fds.push_back({s->stdinFd(), POLLOUT, 0});
            owners.push_back({s.get(), s->stdinFd()});
        }
        if (auto d = s->nextDeadlineMs(); d > 0) timeout = static_cast<int>(std::max<std::int64_t>(0, std::min<std::int64_t>(timeout, d - now)));
    }
    // While the host is away the port reports POLLHUP at once; poll it only
    // at a slow pace then instead of spinning.
    if (!hostConnected_) fds[0].events = POLLIN;
    int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0) return;

    short portRevents = fds[0].revents;
    if (portRevents & POLLHUP) {
        if (hostConnected_) onHostGone();
        if (!(portRevents & POLLIN)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } else {
        hostConnected_ = true;
    }
    if (portRevents & POLLIN) onPortReadable();
    reapChildren();
    if (fds[2].revents & POLLIN) {
        stopping_ = true;
        return;
    }
    for (std::size_t i = kFixed; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        auto [session, fd] = owners[i - kFixed];
        if (!sessions_.count(session->stream()) || sessions_[session->stream()].get() != session) continue;
        if (fd == session->stdinFd()) {
            session->writeStdin();
        } else {
            pumpSessionOutput(*session, fd,
                              fd == session->stdoutFd() ? protocol::Channel::stdout_ : protocol::Channel::stderr_);
        }
    }
    now = nowMs();
    for (auto& [id, s] : sessions_) s->tick(now);
    finishSessions();
    if (hostConnected_ && port_.queued() > 0 && !port_.flush()) onHostGone();
}

void Agent::pumpSessionOutput(ExecSession& session, int fd, protocol::Channel channel) {
    std::size_t max = std::min<std::size_t>({kReadChunk, std::size_t(session.credit()), protocol::kMaxPayload});
    if (max == 0) return;
    std::string chunk = session.readOutput(fd, max);
    if (chunk.empty()) return;
    session.spendCredit(static_cast<std::uint32_t>(chunk.size()));
    sendFrame(FrameType::data, session.stream(), chunk, static_cast<std::uint8_t>(channel));
}

void Agent::reapChildren() {
    signalfd_siginfo info;
    while (::read(signalFd_.get(), &info, sizeof info) == sizeof info) {
    }
    // Per session rather than waitpid(-1): when the agent is embedded in a
    // threaded process (tests) SIGCHLD may go to another thread, so this also
    // runs on every loop turn.
    for (auto& [id, s] : sessions_) {
        if (s->exited() || s->pid() <= 0) continue;
        int status = 0;
        if (::waitpid(s->pid(), &status, WNOHANG) == s->pid()) s->onExited(status);
    }
}

void Agent::finishSessions() {
    for (auto it = sessions_.begin(); it != sessions_.end();) {
        if (it->second->finished()) {
            sendFrame(FrameType::close, it->first, protocol::toJson(it->second->result()));
            it = sessions_.erase(it);
        } else {
            ++it;
        }
    }
}

void Agent::onPortReadable() {
    std::string bytes;
    long n = port_.readSome(bytes, kReadChunk);
    if (n <= 0) return;
    decoder_.feed(bytes);
    protocol::Frame frame;
    while (true) {
        auto r = decoder_.next(frame);
        if (r == protocol::FrameDecoder::Result::need_more) break;
        if (r == protocol::FrameDecoder::Result::error) {
            // Lost sync with the host: tell it, drop the session, wait for a new hello.
            agentLog("protocol error: " + decoder_.lastError());
            sendReset(0, "protocol_error", decoder_.lastError());
            dropAllSessions();
            sessionOpen_ = false;
            decoder_.clear();
            decoder_.setResync(true);
            break;
        }
        handleFrame(frame);
    }
}

void Agent::onHostGone() {
    hostConnected_ = false;
    sessionOpen_ = false;
    // Bytes half-sent to the old host are worthless to the next one.
    port_.dropQueued();
    decoder_.clear();
    decoder_.setResync(true);
    dropAllSessions();
}

void Agent::dropAllSessions() {
    // Streamed execs belong to the host session that asked for them.
    sessions_.clear();
}

void Agent::handleFrame(const protocol::Frame& frame) {
    if (frame.type == FrameType::hello) return handleHello(frame);
    if (!sessionOpen_) return;  // stale frames from before the hello
    switch (frame.type) {
        case FrameType::ping:
            sendFrame(FrameType::pong, frame.stream, frame.payload);
            return;
        case FrameType::open:
            return handleOpen(frame);
        case FrameType::window: {
            std::uint32_t credit = 0;
            auto it = sessions_.find(frame.stream);
            if (!protocol::decodeWindowPayload(frame.payload, credit))
                return sendReset(frame.stream, "bad_frame", "window payload must be 4 bytes");
            if (it != sessions_.end()) it->second->addCredit(credit);
            return;
        }
        case FrameType::reset: {
            auto it = sessions_.find(frame.stream);
            if (it != sessions_.end()) sessions_.erase(it);  // destructor kills the group
            return;
        }
        case FrameType::data:
        case FrameType::close:
            // Streamed stdin arrives with the WebSocket exec; until then ignore.
            return;
        default:
            return sendReset(frame.stream, "bad_frame", "unexpected frame type from host");
    }
}

void Agent::handleHello(const protocol::Frame& frame) {
    try {
        auto hello = protocol::parseHello(frame.payload);
        if (hello.version != protocol::kProtocolVersion) {
            sessionOpen_ = true;
            sendReset(0, "version_mismatch", "agent speaks version " + std::to_string(protocol::kProtocolVersion));
            sessionOpen_ = false;
            return;
        }
        dropAllSessions();
        port_.dropQueued();
        ++epoch_;
        sessionOpen_ = true;
        decoder_.setResync(false);
        sendFrame(FrameType::hello_ack, 0,
                  protocol::toJson(protocol::HelloAck{protocol::kProtocolVersion, hello.nonce, epoch_,
                                                      "airlock-agent 0.1.0"}));
    } catch (const protocol::MessageError& e) {
        sendReset(0, "bad_hello", e.message);
    }
}

void Agent::handleOpen(const protocol::Frame& frame) {
    if (frame.stream == 0) return sendReset(0, "bad_frame", "open on stream 0");
    if (sessions_.count(frame.stream)) return sendReset(frame.stream, "bad_frame", "stream already open");
    if (sessions_.size() >= kMaxSessions) return sendReset(frame.stream, "busy", "too many open streams");
    protocol::ExecRequest request;
    try {
        request = protocol::parseExecRequest(frame.payload);
    } catch (const protocol::MessageError& e) {
        return sendReset(frame.stream, "bad_request", e.message);
    }
    auto session = std::make_unique<ExecSession>(frame.stream, request);
    if (session->finished()) {
        sendFrame(FrameType::close, frame.stream, protocol::toJson(session->result()));
        return;
    }
    sessions_[frame.stream] = std::move(session);
}

}  // namespace airlock::guest

#include "agent/Agent.hpp"

#include <fcntl.h>
#include <linux/random.h>
#include <linux/vm_sockets.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "agent/DirWatchStream.hpp"
#include "agent/EgressListener.hpp"
#include "agent/ExecStream.hpp"
#include "agent/FileActivity.hpp"
#include "agent/FileStreams.hpp"
#include "agent/Spawn.hpp"
#include "agent/TunnelStream.hpp"
#include "agent/UsageReader.hpp"
#include "agent/WorkspaceStreams.hpp"
#include "protocol/JsonText.hpp"
#include "protocol/Messages.hpp"

namespace airlock::guest {
using protocol::Op;
namespace {
using protocol::FrameType;

void agentLog(const std::string& msg) { std::fprintf(stderr, "airlock-agent: %s\n", msg.c_str()); }

constexpr std::size_t kReadChunk = 64 * 1024;
// Stop producing output while this much waits for the host: commands then
// block on their pipes and memory stays bounded.
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

Agent::Agent(UniqueFd connectedPort) : Agent(std::string()) {
    port_.adopt(std::move(connectedPort));
}

Agent::~Agent() = default;

void Agent::stop() {
    std::uint64_t one = 1;
    (void)!::write(stopFd_.get(), &one, sizeof one);
}

bool Agent::openPort() {
    if (port_.fd() >= 0) return true;
    // The port appears once virtio_console is loaded; a domain made for the
    // vsock transport has a vsock device instead. Wait for either.
    for (int attempt = 0; attempt < 600; ++attempt) {
        std::string dev = PortChannel::findPortDevice(portName_);
        if (!dev.empty() && port_.open(dev)) {
            agentLog("serving on " + dev);
            return true;
        }
        if (listenVsock()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

bool Agent::listenVsock() {
    // Only when a virtio vsock device is bound: the modules alone load everywhere.
    std::error_code ec;
    bool device = false;
    for (const auto& e : std::filesystem::directory_iterator(
             "/sys/bus/virtio/drivers/vmw_vsock_virtio_transport", ec))
        device = device || e.path().filename().string().rfind("virtio", 0) == 0;
    if (!device) return false;
    UniqueFd fd(::socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_vm addr{};
    addr.svm_family = AF_VSOCK;
    addr.svm_cid = VMADDR_CID_ANY;
    addr.svm_port = 1024;
    if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd.get(), 4) != 0)
        return false;
    vsockListener_ = std::move(fd);
    agentLog("serving on vsock port 1024");
    return true;
}

void Agent::acceptVsock() {
    UniqueFd conn(::accept4(vsockListener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) return;
    // A new host replaces the old one, as a reconnect on virtio-serial does.
    if (hostConnected_) onHostGone();
    port_.adopt(std::move(conn));
    port_.dropQueued();
}

int Agent::run() {
    if (!openPort()) {
        agentLog("no virtio port named " + portName_);
        return 1;
    }
    // Tell a host that may be waiting on the previous agent instance (killed,
    // restarted by init) that its streams are gone; it reconnects with a hello.
    port_.enqueue(protocol::encodeFrame(
        FrameType::reset, 0,
        protocol::toJson(protocol::ResetInfo{"agent_started", "the agent (re)started"})));
    while (!stopping_) pollOnce();
    return 0;
}

bool Agent::outputRoom() const { return sessionOpen_ && port_.queued() < kOutputHighWater; }

void Agent::sendFrame(FrameType type, std::uint32_t stream, std::string_view payload,
                      std::uint8_t flags) {
    // Only what belongs to the current host session is worth queueing.
    if (!sessionOpen_ && type != FrameType::hello_ack && type != FrameType::reset) return;
    if (!port_.enqueueFrame(type, stream, payload, flags))
        agentLog("output queue full, dropping a frame");
}

void Agent::sendReset(std::uint32_t stream, const std::string& code, const std::string& message) {
    sendFrame(FrameType::reset, stream, protocol::toJson(protocol::ResetInfo{code, message}));
}

void Agent::pollOnce() {
    PollSet set;
    short portEvents = POLLIN;
    if (hostConnected_ && port_.queued() > 0) portEvents |= POLLOUT;
    set.add(port_.fd(), portEvents, nullptr);
    set.add(signalFd_.get(), POLLIN, nullptr);
    set.add(stopFd_.get(), POLLIN, nullptr);
    set.add(vsockListener_.get(), POLLIN, nullptr);  // -1 (ignored by poll) on virtio-serial
    set.add(activity_ ? activity_->fd() : -1, POLLIN, nullptr);
    const std::size_t fixed = set.fds.size();
    for (auto& [id, s] : streams_) s->collectFds(set);
    const std::size_t streamEnd = set.fds.size();
    std::vector<BackgroundProcess*> procOwners;
    processes_.collectFds(set.fds, procOwners);

    std::int64_t now = monotonicMs();
    int timeout = !hostConnected_ ? 100 : streams_.empty() ? 1000 : 200;
    for (auto& [id, s] : streams_) {
        if (auto d = s->nextDeadlineMs(); d > 0)
            timeout = static_cast<int>(std::clamp<std::int64_t>(d - now, 0, timeout));
        if (s->readyToProduce()) timeout = 0;
    }
    if (baseline_ && baseline_->wantsToWrite(baselinePort_, kOutputHighWater)) timeout = 0;
    int n = ::poll(set.fds.data(), set.fds.size(), timeout);
    if (n < 0) return;
    // File events first, while the commands that caused them still have
    // their streams (a finished one is swept at the end of this round).
    if (set.fds[4].revents & POLLIN)
        activity_->onReadable([this](pid_t pid) { return traceOfProcess(pid); });

    // Streams' and processes' fds go first, while every owner collected above
    // is alive: only frames from the host (reset, hello, a process start that
    // evicts an exited one, a lost host) and the sweep below destroy owners.
    for (std::size_t i = fixed; i < streamEnd; ++i) {
        StreamHandler* owner = set.owners[i];
        if (set.fds[i].revents && !owner->done())
            owner->onFdReady(set.fds[i].fd, set.fds[i].revents);
    }
    for (std::size_t i = streamEnd; i < set.fds.size(); ++i)
        if (set.fds[i].revents) procOwners[i - streamEnd]->onFdReady(set.fds[i].fd);

    short portRevents = set.fds[0].revents;
    if (portRevents & (POLLHUP | POLLERR)) {
        // No host on the other end. virtio-serial then reports HUP (often
        // with POLLIN and empty reads) on every poll: drop what is readable
        // (stale bytes of the old host) and wait instead of spinning.
        if (hostConnected_) onHostGone();
        if (vsockListener_) {
            port_.adopt(UniqueFd());  // a vsock connection is over for good; wait for the next
        } else {
            std::string stale;
            while (port_.readSome(stale, kReadChunk) > 0) stale.clear();
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    } else if (port_.fd() >= 0) {
        hostConnected_ = true;
        if (portRevents & POLLIN) onPortReadable();
    }
    if (set.fds[1].revents & POLLIN) {
        signalfd_siginfo info;
        while (::read(signalFd_.get(), &info, sizeof info) == sizeof info) {
        }
    }
    if (set.fds[2].revents & POLLIN) {
        stopping_ = true;
        return;
    }
    if (set.fds[3].revents & POLLIN) acceptVsock();
    processes_.reapAll();
    if (baseline_) baseline_->pump(baselinePort_, kOutputHighWater);
    now = monotonicMs();
    for (auto it = streams_.begin(); it != streams_.end();) {
        it->second->tick(now);
        if (it->second->done())
            it = streams_.erase(it);
        else
            ++it;
    }
    if (hostConnected_ && port_.queued() > 0 && !port_.flush()) onHostGone();
}

void Agent::installBaseline(std::unique_ptr<ChannelBaseline> baseline) {
    baseline_ = std::move(baseline);
    baselinePort_ = BaselinePort{
        [this](std::string_view bytes) { port_.enqueue(bytes); }, [this] { return port_.queued(); },
        [this](FrameType type, std::uint32_t stream, std::string_view payload) {
            sendFrame(type, stream, payload);
        }};
}

void Agent::onPortReadable() {
    std::string bytes;
    long n = port_.readSome(bytes, kReadChunk);
    if (n <= 0) return;
    if (baseline_ && baseline_->active()) {
        std::size_t used = baseline_->consume(bytes, baselinePort_);
        bytes.erase(0, used);
        if (bytes.empty()) return;
    }
    decoder_.feed(bytes);
    protocol::Frame frame;
    while (true) {
        auto r = decoder_.next(frame);
        if (r == protocol::FrameDecoder::Result::need_more) break;
        if (r == protocol::FrameDecoder::Result::error) {
            // Lost sync with the host: tell it, drop the session, wait for a new hello.
            agentLog("protocol error: " + decoder_.lastError());
            sendReset(0, "protocol_error", decoder_.lastError());
            dropSessionStreams();
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
    dropSessionStreams();
}

void Agent::dropSessionStreams() {
    // Streams (execs, transfers, tunnels) belong to the host session that
    // opened them; background processes do not and keep running.
    streams_.clear();
}

void Agent::handleFrame(const protocol::Frame& frame) {
    if (frame.type == FrameType::hello) return handleHello(frame);
    if (!sessionOpen_) return;  // stale frames from before the hello
    if (frame.type == FrameType::ping)
        return sendFrame(FrameType::pong, frame.stream, frame.payload);
    if (frame.type == FrameType::open) return handleOpen(frame);
    auto it = streams_.find(frame.stream);
    if (it == streams_.end()) return;  // a finished stream's stragglers
    StreamHandler& s = *it->second;
    switch (frame.type) {
        case FrameType::window: {
            std::uint32_t credit = 0;
            if (!protocol::decodeWindowPayload(frame.payload, credit))
                return s.fail("bad_frame", "window payload must be 4 bytes");
            s.addCredit(credit);
            return;
        }
        case FrameType::data:
            if (s.acceptIncoming(frame.payload.size())) s.onData(frame.flags, frame.payload);
            return;
        case FrameType::close:
            return s.onCloseWrite();
        case FrameType::control: {
            std::optional<protocol::ControlFrame> control;
            try {
                control = protocol::parseControl(frame.payload);
            } catch (const protocol::MessageError& e) {
                return s.fail("bad_frame", e.what());
            }
            return s.onControl(*control);
        }
        case FrameType::reset:
            streams_.erase(it);  // handlers' destructors kill what they started
            return;
        default:
            return s.fail("bad_frame", "unexpected frame type from host");
    }
}

void Agent::handleHello(const protocol::Frame& frame) {
    try {
        auto hello = protocol::parseHello(frame.payload);
        if (hello.version != protocol::kProtocolVersion) {
            sendReset(0, "version_mismatch",
                      "agent speaks version " + std::to_string(protocol::kProtocolVersion));
            return;
        }
        dropSessionStreams();
        port_.dropQueued();
        ++epoch_;
        sessionOpen_ = true;
        decoder_.setResync(false);
        sendFrame(FrameType::hello_ack, 0,
                  protocol::toJson(protocol::HelloAck{protocol::kProtocolVersion, hello.nonce,
                                                      epoch_, "airlock-agent 0.2.0"}));
    } catch (const protocol::MessageError& e) {
        sendReset(0, "bad_hello", e.message);
    }
}

void Agent::handleOpen(const protocol::Frame& frame) {
    const std::uint32_t id = frame.stream;
    if (id == 0) return sendReset(0, "bad_frame", "open on stream 0");
    if (streams_.count(id)) return sendReset(id, "bad_frame", "stream already open");
    if (streams_.size() >= kMaxStreams) return sendReset(id, "busy", "too many open streams");
    auto opened = protocol::openOp(frame.payload);
    if (!opened) return sendReset(id, "bad_request", "open payload must be a JSON object");
    const std::string& name = *opened;
    auto op = protocol::parseOp(name);
    if (!op && baseline_ && baseline_->claims(name)) {
        if (auto refusal = baseline_->start(id, frame.payload, streams_.empty(), baselinePort_))
            return sendReset(id, refusal->code, refusal->message);
        return;
    }
    if (!op) return sendReset(id, "bad_request", "unknown op '" + name.substr(0, 64) + "'");
    std::unique_ptr<StreamHandler> handler;
    try {
        switch (*op) {
            case Op::exec:
                handler = std::make_unique<ExecStream>(id, *this,
                                                       protocol::parseExecRequest(frame.payload));
                break;
            case Op::file_write:
                handler = std::make_unique<FileWriteStream>(
                    id, *this, protocol::parseFileWrite(frame.payload));
                break;
            case Op::file_read:
                handler = std::make_unique<FileReadStream>(id, *this,
                                                           protocol::parseFileRead(frame.payload));
                break;
            case Op::workspace_scan:
                handler = std::make_unique<WorkspaceScanStream>(
                    id, *this, protocol::parseWorkspaceScan(frame.payload));
                break;
            case Op::archive_unpack:
                handler = std::make_unique<ArchiveUnpackStream>(
                    id, *this, protocol::parseArchiveUnpack(frame.payload));
                break;
            case Op::fs:
                return runFsOp(id, *this, protocol::parseFsRequest(frame.payload));
            case Op::tunnel:
                handler = std::make_unique<TunnelStream>(
                    id, *this, protocol::parsePortRequest(*op, frame.payload));
                break;
            case Op::egress_listen:
                // The egress proxy and the package proxy's ecosystems: a few
                // ports, each listened on once (a second bind of a port fails).
                if (egressListeners().size() >= kMaxEgressListeners)
                    return sendReset(id, "conflict", "too many egress listeners are open");
                handler = std::make_unique<EgressListener>(
                    id, *this, protocol::parsePortRequest(*op, frame.payload));
                break;
            case Op::egress_attach: {
                UniqueFd conn;
                auto number = protocol::parseEgressAttach(frame.payload).connection;
                for (EgressListener* listener : egressListeners())
                    if ((conn = listener->take(number))) break;
                if (!conn)
                    return sendReset(id, "not_found",
                                     "no pending egress connection with that number");
                handler = std::make_unique<TunnelStream>(id, *this, std::move(conn));
                break;
            }
            case Op::file_watch:
            case Op::file_activity:
                return handleFileWatch(id, protocol::parseFileWatch(*op, frame.payload));
            case Op::reseed:
                return handleReseed(id, protocol::parseReseed(frame.payload));
            case Op::dir_watch:
                // Each holds an inotify instance, of which the kernel gives root 128.
                if (DirWatchStream::live() >= DirWatchStream::kMaxLive)
                    return sendReset(id, "resource_exhausted", "too many directory watches are open");
                handler = std::make_unique<DirWatchStream>(id, *this,
                                                           protocol::parseDirWatch(frame.payload));
                break;
            case Op::usage: {
                protocol::GuestUsage usage;
                if (auto error = UsageReader().read(usage); !error.empty())
                    return sendReset(id, "internal", error);
                return sendFrame(FrameType::close, id, jsonText(protocol::toJsonValue(usage)));
            }
            case Op::process_start:
            case Op::process_list:
            case Op::process_get:
            case Op::process_signal:
            case Op::process_stdin:
            case Op::process_logs:
                return handleProcessOp(id, *op, frame.payload);
        }
    } catch (const protocol::MessageError& e) {
        return sendReset(id, "bad_request", e.message);
    } catch (const std::exception& e) {
        return sendReset(id, "internal", e.what());
    }
    if (!handler) return;
    if (!handler->done()) streams_[id] = std::move(handler);
}

void Agent::handleFileWatch(std::uint32_t id, const protocol::FileWatchRequest& request) {
    if (request.op == Op::file_watch) {
        if (request.path.empty() || request.path[0] != '/')
            return sendReset(id, "bad_request", "file_watch: 'path' must be an absolute directory");
        bool inotify = request.mechanism == "inotify";
        auto fresh = std::make_unique<FileActivity>();
        if (auto error = fresh->watch(request.path, inotify); !error.empty())
            return sendReset(id, "bad_request", "file_watch: " + error);
        activity_ = std::move(fresh);
        activity_->onReadable({});
        return sendFrame(FrameType::close, id, jsonText(protocol::toJsonValue(activity_->drain())));
    }
    if (!activity_)
        return sendFrame(FrameType::close, id,
                         jsonText(protocol::toJsonValue(protocol::FileActivityReport{})));
    // What is queued belongs to this drain.
    activity_->onReadable([this](pid_t pid) { return traceOfProcess(pid); });
    sendFrame(FrameType::close, id, jsonText(protocol::toJsonValue(activity_->drain())));
}

std::string Agent::traceOfProcess(pid_t pid) {
    pid_t session = -1;
    std::string stat;
    {
        UniqueFd f(
            ::open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC));
        char buf[512];
        ssize_t n = f ? ::read(f.get(), buf, sizeof buf - 1) : -1;
        if (n > 0) stat.assign(buf, static_cast<std::size_t>(n));
    }
    // Fields after the command name (which may hold spaces and parentheses):
    // state ppid pgrp session ...
    if (auto close = stat.rfind(')'); close != std::string::npos) {
        int ppid = 0, pgrp = 0, sid = 0;
        char state = 0;
        if (std::sscanf(stat.c_str() + close + 1, " %c %d %d %d", &state, &ppid, &pgrp, &sid) == 4)
            session = sid;
    }
    std::string only;
    std::size_t running = 0;
    for (auto& [sid, s] : streams_) {
        auto* exec = dynamic_cast<ExecStream*>(s.get());
        if (!exec || exec->done()) continue;
        if (session > 0 && exec->sessionPid() == session) return exec->trace();
        ++running;
        only = exec->trace();
    }
    if (session > 0)
        if (BackgroundProcess* p = processes_.find(session)) return p->trace();
    if (session > 0) return {};  // alive, in no command's session
    BackgroundProcess* onlyBackground = processes_.onlyRunning();
    if (running == 1 && processes_.runningCount() == 0) return only;
    if (running == 0 && onlyBackground) return onlyBackground->trace();
    return {};
}

std::vector<EgressListener*> Agent::egressListeners() {
    std::vector<EgressListener*> out;
    for (auto& [id, s] : streams_)
        if (auto* l = dynamic_cast<EgressListener*>(s.get()); l && !l->done()) out.push_back(l);
    return out;
}

void Agent::handleReseed(std::uint32_t id, const protocol::ReseedRequest& request) {
    const std::string& hex = request.entropy;
    if (hex.size() < 64 || hex.size() > 1024 || hex.size() % 2 != 0 ||
        hex.find_first_not_of("0123456789abcdef") != std::string::npos)
        return sendReset(id, "bad_request", "entropy must be 32 to 512 bytes of lowercase hex");
    std::vector<unsigned char> bytes(hex.size() / 2);
    for (std::size_t i = 0; i < bytes.size(); ++i)
        bytes[i] = static_cast<unsigned char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
    std::vector<unsigned char> buf(sizeof(rand_pool_info) + bytes.size());
    auto* info = reinterpret_cast<rand_pool_info*>(buf.data());
    info->entropy_count = static_cast<int>(bytes.size() * 8);
    info->buf_size = static_cast<int>(bytes.size());
    std::memcpy(info->buf, bytes.data(), bytes.size());
    UniqueFd random(::open("/dev/urandom", O_RDWR | O_CLOEXEC));
    if (!random)
        return sendReset(id, "internal", std::string("open /dev/urandom: ") + std::strerror(errno));
    if (::ioctl(random.get(), RNDADDENTROPY, info) != 0)
        return sendReset(id, "internal", std::string("RNDADDENTROPY: ") + std::strerror(errno));
    if (::ioctl(random.get(), RNDRESEEDCRNG) != 0)
        return sendReset(id, "internal", std::string("RNDRESEEDCRNG: ") + std::strerror(errno));
    bool clockSet = false;
    if (request.timeNs) {
        auto ns = *request.timeNs;
        timespec now{};
        ::clock_gettime(CLOCK_REALTIME, &now);
        auto current = static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ULL +
                       static_cast<std::uint64_t>(now.tv_nsec);
        // Only a clock that is clearly off (a restored snapshot's) is stepped.
        if ((ns > current ? ns - current : current - ns) > 1'000'000'000ULL) {
            timespec ts{static_cast<time_t>(ns / 1'000'000'000ULL),
                        static_cast<long>(ns % 1'000'000'000ULL)};
            clockSet = ::clock_settime(CLOCK_REALTIME, &ts) == 0;
        }
    }
    sendFrame(FrameType::close, id, jsonText({{"reseeded", true}, {"clock_set", clockSet}}));
}

void Agent::handleProcessOp(std::uint32_t id, protocol::Op op, const std::string& payload) {
    auto reply = [&](const nlohmann::json& j) { sendFrame(FrameType::close, id, jsonText(j)); };
    if (op == Op::process_start) {
        auto exec = protocol::parseExecRequest(payload);  // MessageError: a bad_request reset
        std::string code, error;
        auto started = processes_.start(exec, code, error);
        if (!started) return sendReset(id, code, error);
        return reply(protocol::toJsonValue(*started));
    }
    std::string processId;
    protocol::ProcessCall call;
    std::optional<protocol::ProcessLogsRequest> logs;
    if (op == Op::process_logs) {
        logs = protocol::parseProcessLogs(payload);
        processId = logs->id;
    } else {
        call = protocol::parseProcessCall(op, payload);
        processId = call.id;
    }
    if (op == Op::process_list) return reply(protocol::toJsonValue(processes_.list()));
    pid_t pid = 0;
    if (!processId.empty() && processId.size() < 10 &&
        processId.find_first_not_of("0123456789") == std::string::npos)
        pid = std::stoi(processId);
    BackgroundProcess* proc = pid > 0 ? processes_.find(pid) : nullptr;
    if (!proc) return sendReset(id, "not_found", "no background process with that id");
    if (op == Op::process_get) return reply(protocol::toJsonValue(proc->describe()));
    if (op == Op::process_signal) {
        int sig = signalFromName(call.signal);
        if (!sig) return sendReset(id, "bad_request", "unknown signal");
        proc->signal(sig);
        return reply(protocol::toJsonValue(proc->describe()));
    }
    if (op == Op::process_stdin) {
        if (call.data && !proc->writeStdin(*call.data))
            return sendReset(id, "conflict", "stdin is closed");
        if (call.eof) proc->closeStdin();
        return reply(protocol::toJsonValue(proc->describe()));
    }
    if (op == Op::process_logs) {
        auto handler = std::make_unique<ProcessLogStream>(id, *this, processes_, pid, logs->follow);
        if (!handler->done()) streams_[id] = std::move(handler);
        return;
    }
    sendReset(id, "bad_request", "not a process operation");
}

}  // namespace airlock::guest

#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agentclient/AgentStream.hpp"
#include "core/Error.hpp"
#include "core/UniqueFd.hpp"
#include "protocol/FrameDecoder.hpp"
#include "protocol/GuestCalls.hpp"
#include "protocol/Messages.hpp"

namespace airlock {

struct ExecOutput {
    protocol::ExecResult result;
    std::string stdoutData;
    std::string stderrData;
    bool truncated = false;
    std::int64_t durationMs = 0;
};

// Maps an agent's reset code ("not_found", "conflict", ...) to a typed error.
Error agentError(const std::string& code, const std::string& message);

// An exec in flight (execAsync). Its callback runs exactly once: with the
// output, or with the error that ended it (agent reset, lost connection,
// cancel()).
class PendingExec {
  public:
    using Done = std::function<void(std::optional<ExecOutput>, std::exception_ptr)>;
    // Ends the exec with `error` (unless it already ended) and resets its stream.
    void cancel(const Error& error);
    bool ended() const { return ended_.load(); }

  private:
    friend class AgentConnection;
    void finish(std::optional<ExecOutput> out, std::exception_ptr error);
    void hold(std::shared_ptr<AgentStream> stream);
    std::shared_ptr<AgentStream> stream();
    Done done_;
    std::atomic<bool> ended_{false};
    std::mutex holdMutex_;
    std::weak_ptr<AgentStream> stream_;
    std::shared_ptr<AgentStream> streamHold_;
    ExecOutput out_;
    std::size_t outputCap_ = 0;
    std::int64_t startedMs_ = 0;
};

// Bounds on what one sandbox's channel may hold on the host.
struct AgentChannelLimits {
    // Open streams at once (each may buffer up to its receive window).
    std::size_t maxStreams = 128;
    // Encoded frames queued for the guest: data waits beyond dataQueueBytes;
    // beyond queueHardBytes (only control frames get that far) the guest is
    // not reading and the session ends.
    std::size_t dataQueueBytes = 4 * 1024 * 1024;
    std::size_t queueHardBytes = 8 * 1024 * 1024;
    // Bytes read during the hello before the agent answered it. A previous
    // session's tail is smaller: at most the agent's send queue (8 MiB,
    // guest-agent/agent/PortChannel.hpp) and a few MiB in flight in the
    // virtqueue and QEMU. More is a guest flooding its channel instead of
    // answering: a protocol error, not a wait for the handshake's deadline.
    std::size_t handshakeBytes = 16 * 1024 * 1024;
};

// The host end of one sandbox's agent channel: a unix socket that QEMU
// bridges to the guest's virtio-serial port (or an AF_VSOCK socket). One
// thread per connection reads and writes it: incoming frames are
// demultiplexed into AgentStreams, outgoing frames wait in a bounded queue,
// so no caller ever blocks on a guest that stopped reading. Everything the
// guest sends is untrusted: a frame that breaks the protocol ends this
// session (never the process) and is reported to the protocol-error handler.
class AgentConnection : public std::enable_shared_from_this<AgentConnection> {
  public:
    // Connects (retrying until the socket exists) and performs the hello
    // handshake; throws Error(agent_timeout) when the agent does not answer
    // before `timeout`, AgentProtocolError when it floods the channel instead.
    static std::shared_ptr<AgentConnection> connect(const std::string& socketPath,
                                                    std::chrono::milliseconds timeout);
    // Wraps an already connected byte stream (socketpairs in tests, vsock).
    static std::shared_ptr<AgentConnection> fromFd(UniqueFd fd, std::chrono::milliseconds timeout,
                                                   AgentChannelLimits limits = {});

    ~AgentConnection();
    AgentConnection(const AgentConnection&) = delete;
    AgentConnection& operator=(const AgentConnection&) = delete;

    // Called on the connection's thread when the guest broke the protocol:
    // the session is then failed (sessionEnded, the last call), or only one
    // stream was reset (flow control). Set it right after connecting.
    using ProtocolErrorHandler = std::function<void(const std::string& why, bool sessionEnded)>;
    void onProtocolError(ProtocolErrorHandler handler);

    // Opens a stream with the given open request (JSON with "op").
    // autoGrant (push handlers only): data is granted back as soon as the
    // handler returned, for consumers that copy it into bounded buffers.
    std::shared_ptr<AgentStream> open(const protocol::GuestRequest& request,
                                      AgentStream::Handler handler = nullptr,
                                      bool autoGrant = false);
    // The same from JSON, its op checked against the closed set: for tests
    // of what a guest does with odd requests.
    std::shared_ptr<AgentStream> open(const nlohmann::json& request,
                                      AgentStream::Handler handler = nullptr,
                                      bool autoGrant = false);

    // One-shot request: opens, waits for the close, returns its JSON; an
    // agent reset becomes the matching Error.
    nlohmann::json call(const protocol::GuestRequest& request, std::chrono::milliseconds wait);
    nlohmann::json call(const nlohmann::json& request, std::chrono::milliseconds wait);

    // Runs one command and collects its output; the agent caps each of
    // stdout/stderr at `outputCap` bytes (the rest is drained in the guest and
    // dropped: `truncated`). Holds no thread while it runs: `done` is called
    // on the connection's thread. stdin of any size up to the caller's limit
    // streams under flow control.
    std::shared_ptr<PendingExec> execAsync(const protocol::ExecRequest& request,
                                           std::size_t outputCap, PendingExec::Done done);
    // The blocking form: waits at most `wait`, then cancels the command.
    ExecOutput exec(const protocol::ExecRequest& request, std::size_t outputCap,
                    std::chrono::milliseconds wait);

    bool ping(std::chrono::milliseconds wait);
    // Stops the connection's thread and fails every open stream; idempotent.
    // With a reason (the host is removing the sandbox), open calls fail with
    // it, as a conflict (code sandbox_gone), not as a lost guest; so does
    // any open after it. The streams still hear it on the connection's
    // thread, as every event.
    void close(const std::string& why = {});
    // close(), then waits until the thread ended (its callbacks have run).
    void closeAndWait();

    bool alive() const { return alive_.load(); }
    // What sleep-when-idle reads: when a caller's traffic last crossed the
    // channel (an open, data either way; steady ms), and how many callers'
    // streams are open now. The channel's own services (the egress
    // listener, usage samples, file watchers) are not callers.
    struct Activity {
        std::int64_t lastTrafficMs = 0;
        std::size_t openStreams = 0;
    };
    Activity activity() const;
    // Traffic now (a resume: the time paused is not idle time).
    void touch();
    std::uint64_t epoch() const { return epoch_; }
    const std::string& agentVersion() const { return agentVersion_; }
    std::string failure() const;
    std::size_t queuedBytes() const;

    // Used by AgentStream. Never blocks: the frame is queued; throws
    // Error(agent_error) when the session is down or the guest stopped
    // reading (the session is then failed).
    void sendFrame(protocol::FrameType type, std::uint32_t stream, const std::string& payload,
                   std::uint8_t flags = 0);
    // Data frames: waits (until `deadline`) while the queue holds more than
    // its data budget.
    void sendData(std::uint32_t stream, std::string_view payload, std::uint8_t channel,
                  std::chrono::steady_clock::time_point deadline);
    // Like sendData without waiting: false when the data budget is used up
    // (the stream retries when the queue drains).
    bool trySendData(std::uint32_t stream, std::string_view payload, std::uint8_t channel);
    void forget(std::uint32_t stream);

  private:
    // service: one of the channel's own streams (not a caller's activity).
    std::shared_ptr<AgentStream> openPayload(const std::string& payload,
                                             AgentStream::Handler handler, bool autoGrant,
                                             bool service);
    nlohmann::json awaitClose(const std::shared_ptr<AgentStream>& stream,
                              std::chrono::milliseconds wait);
    AgentConnection(UniqueFd fd, AgentChannelLimits limits);
    void handshake(std::chrono::milliseconds timeout);
    void startThread();
    void run();
    void loop();
    // Writes what the socket takes without blocking; false on a dead socket.
    bool flush();
    void enqueue(std::string bytes, bool isData);
    void wake();
    void onBytes(std::string_view bytes);
    void dispatch(const protocol::Frame& frame);
    void protocolError(const std::string& why);
    void failAll(const std::string& why);
    void notifyDrained();

    UniqueFd fd_;
    UniqueFd wakeFd_;  // eventfd: close() or frames queued
    std::thread thread_;
    std::mutex joinMutex_;
    std::atomic<bool> alive_{true};
    std::atomic<std::int64_t> lastTrafficMs_{0};
    std::set<std::uint32_t> serviceStreams_;  // under streamsMutex_
    AgentChannelLimits limits_;

    mutable std::mutex queueMutex_;
    std::condition_variable queueCv_;  // data senders waiting for room
    std::deque<std::string> queue_;
    std::size_t queueOffset_ = 0;  // bytes of queue_.front() already written
    std::size_t queueBytes_ = 0;

    mutable std::mutex streamsMutex_;
    std::map<std::uint32_t, std::weak_ptr<AgentStream>> streams_;
    std::uint32_t nextStream_ = 1;
    std::string failure_;
    std::string closeReason_;  // close(why): what every stream fails with
    std::uint64_t epoch_ = 0;
    std::string agentVersion_;
    protocol::FrameDecoder decoder_;

    std::mutex handlerMutex_;
    ProtocolErrorHandler protocolErrorHandler_;

    std::mutex pingMutex_;
    std::condition_variable pingCv_;
    std::uint64_t pongsSeen_ = 0;
};

}  // namespace airlock

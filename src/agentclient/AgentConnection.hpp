#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agentclient/AgentStream.hpp"
#include "core/Error.hpp"
#include "core/UniqueFd.hpp"
#include "protocol/FrameDecoder.hpp"
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

// The host end of one sandbox's agent channel: a unix socket that QEMU
// bridges to the guest's virtio-serial port (or an AF_VSOCK socket). One
// reader thread demultiplexes frames into AgentStreams.
class AgentConnection : public std::enable_shared_from_this<AgentConnection> {
public:
    // Connects (retrying until the socket exists) and performs the hello
    // handshake; throws Error(agent_timeout) when the agent does not answer
    // before `timeout`.
    static std::shared_ptr<AgentConnection> connect(const std::string& socketPath, std::chrono::milliseconds timeout);
    // Wraps an already connected byte stream (socketpairs in tests, vsock).
    static std::shared_ptr<AgentConnection> fromFd(UniqueFd fd, std::chrono::milliseconds timeout);

    ~AgentConnection();
    AgentConnection(const AgentConnection&) = delete;
    AgentConnection& operator=(const AgentConnection&) = delete;

    // Opens a stream with the given open request (JSON with "op").
    std::shared_ptr<AgentStream> open(const nlohmann::json& request, AgentStream::Handler handler = nullptr);

    // One-shot request: opens, waits for the close, returns its JSON; an
    // agent reset becomes the matching Error.
    nlohmann::json call(const nlohmann::json& request, std::chrono::milliseconds wait);

    // Runs one command and collects its output; the agent caps each of
    // stdout/stderr at `outputCap` bytes (the rest is drained in the guest and
    // dropped: `truncated`). Waits at most `wait`, then cancels the command.
    ExecOutput exec(const protocol::ExecRequest& request, std::size_t outputCap, std::chrono::milliseconds wait);

    bool ping(std::chrono::milliseconds wait);

    // Benchmark baseline: the bare channel without framing. sink: we send
    // `bytes` raw bytes; source: the agent sends them; echo: `bytes` one-byte
    // round trips. Returns the wall time of each round trip (echo) or one
    // entry with the whole transfer. Needs an otherwise idle connection.
    std::vector<std::chrono::nanoseconds> rawBench(const std::string& mode, std::uint64_t bytes,
                                                  std::chrono::milliseconds wait);
    // Stops the reader and fails every open stream; idempotent.
    void close();

    bool alive() const { return alive_.load(); }
    std::uint64_t epoch() const { return epoch_; }
    const std::string& agentVersion() const { return agentVersion_; }

    // Used by AgentStream.
    void sendFrame(protocol::FrameType type, std::uint32_t stream, const std::string& payload, std::uint8_t flags = 0);
    void forget(std::uint32_t stream);

private:
    explicit AgentConnection(UniqueFd fd);
    void handshake(std::chrono::milliseconds timeout);
    void startReader();
    void readerLoop();
    void dispatch(const protocol::Frame& frame);
    void failAll(const std::string& why);

    UniqueFd fd_;
    UniqueFd wakeFd_;  // eventfd that stops the reader
    std::thread reader_;
    std::atomic<bool> alive_{true};
    std::mutex writeMutex_;
    std::mutex streamsMutex_;
    std::map<std::uint32_t, std::weak_ptr<AgentStream>> streams_;
    std::uint32_t nextStream_ = 1;
    std::string failure_;
    std::uint64_t epoch_ = 0;
    std::string agentVersion_;
    protocol::FrameDecoder decoder_;

    // Raw bytes the reader must count instead of decoding (rawBench).
    std::mutex rawMutex_;
    std::condition_variable rawCv_;
    std::uint32_t rawStream_ = 0;
    std::uint64_t rawExpected_ = 0, rawReceived_ = 0;
    bool rawActive_ = false;
    std::size_t consumeRaw(std::string_view bytes);

    std::mutex pingMutex_;
    std::condition_variable pingCv_;
    std::uint64_t pongsSeen_ = 0;
};

}  // namespace airlock

#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

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

// The host end of one sandbox's agent channel: a unix socket that QEMU
// bridges to the guest's virtio-serial port. One reader thread demultiplexes
// frames into streams; callers block on their own stream only.
class AgentConnection {
public:
    // Connects (retrying until the socket exists) and performs the hello
    // handshake; throws Error(agent_timeout) when the agent does not answer
    // before `timeout`.
    static std::unique_ptr<AgentConnection> connect(const std::string& socketPath,
                                                    std::chrono::milliseconds timeout);
    // Wraps an already connected byte stream (tests use a socketpair).
    static std::unique_ptr<AgentConnection> fromFd(UniqueFd fd, std::chrono::milliseconds timeout);

    ~AgentConnection();
    AgentConnection(const AgentConnection&) = delete;
    AgentConnection& operator=(const AgentConnection&) = delete;

    // Runs one command and collects its output, each of stdout/stderr capped
    // at `outputCap` bytes (the rest is drained and dropped: `truncated`).
    // Waits at most `wait`; then cancels the command and throws agent_timeout.
    ExecOutput exec(const protocol::ExecRequest& request, std::size_t outputCap,
                    std::chrono::milliseconds wait);

    // Round trip of a ping frame; false on timeout or a dead connection.
    bool ping(std::chrono::milliseconds wait);

    bool alive() const { return alive_.load(); }
    std::uint64_t epoch() const { return epoch_; }
    const std::string& agentVersion() const { return agentVersion_; }

private:
    struct Stream;

    explicit AgentConnection(UniqueFd fd);
    void handshake(std::chrono::milliseconds timeout);
    void startReader();
    void readerLoop();
    void dispatch(const protocol::Frame& frame);
    void failAll(const std::string& why);
    void send(protocol::FrameType type, std::uint32_t stream, const std::string& payload,
              std::uint8_t flags = 0);
    std::shared_ptr<Stream> openStream(std::uint32_t& id, std::size_t cap);
    void closeStream(std::uint32_t id);

    UniqueFd fd_;
    UniqueFd wakeFd_;  // eventfd that stops the reader
    std::thread reader_;
    std::atomic<bool> alive_{true};
    std::mutex writeMutex_;
    std::mutex streamsMutex_;
    std::map<std::uint32_t, std::shared_ptr<Stream>> streams_;
    std::uint32_t nextStream_ = 1;
    std::string failure_;
    std::uint64_t epoch_ = 0;
    std::string agentVersion_;
    protocol::FrameDecoder decoder_;

    std::mutex pingMutex_;
    std::condition_variable pingCv_;
    std::uint64_t pongsSeen_ = 0;
};

}  // namespace airlock

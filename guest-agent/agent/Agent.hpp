#pragma once
#include <cstdint>
#include <map>
#include <vector>
#include <memory>
#include <string>

#include "protocol/GuestCalls.hpp"
#include "agent/ChannelBaseline.hpp"
#include "agent/PortChannel.hpp"
#include "agent/ProcessTable.hpp"
#include "agent/StreamHandler.hpp"
#include "core/UniqueFd.hpp"
#include "protocol/FrameDecoder.hpp"
#include "protocol/Ops.hpp"

namespace airlock::guest {

class EgressListener;
class FileActivity;

// The agent's single-threaded event loop: one poll() over the port, every
// stream's descriptors, every background process's output and a signalfd for
// SIGCHLD. Request handling is trace -> check -> do: every open is logged,
// validated (shape, limits, paths) and only then acted on. Nothing blocks.
class Agent : public FrameSink {
public:
    static constexpr std::size_t kMaxStreams = 256;
    static constexpr std::size_t kMaxEgressListeners = 4;  // egress + npm, PyPI, apt

    explicit Agent(std::string portName);
    // Serves an already open byte stream (tests: one end of a socketpair).
    explicit Agent(UniqueFd connectedPort);
    ~Agent() override;
    // Runs until stop() (in the guest: forever); returns the exit code.
    int run();
    // Thread-safe: makes run() return soon.
    void stop();
    // The channel bench's baseline (airlock-agent-rawbench and unit tests
    // only): its op is served by it; without one, refused as unknown.
    void installBaseline(std::unique_ptr<ChannelBaseline> baseline);

    void sendFrame(protocol::FrameType type, std::uint32_t stream, std::string_view payload,
                   std::uint8_t flags = 0) override;
    bool outputRoom() const override;

private:
    bool openPort();
    bool listenVsock();
    void acceptVsock();
    void pollOnce();
    void onPortReadable();
    void onHostGone();
    void handleFrame(const protocol::Frame& frame);
    void handleHello(const protocol::Frame& frame);
    void handleOpen(const protocol::Frame& frame);
    void handleProcessOp(std::uint32_t stream, protocol::Op op, const std::string& payload);
    // After a restore from a snapshot: mix host entropy into the kernel CRNG
    // and force a reseed (clones must not share random state; this kernel has
    // no vmgenid), and set the wall clock the snapshot froze.
    void handleReseed(std::uint32_t stream, const protocol::ReseedRequest& request);
    // File activity under the workspace: op "file_watch" starts it, op
    // "file_activity" drains the summary.
    void handleFileWatch(std::uint32_t stream, const protocol::FileWatchRequest& request);
    // Which command a guest process belongs to: the trace of the exec or
    // background process whose session it is in; a process already gone is
    // given to the only command running, if exactly one is ("" otherwise).
    std::string traceOfProcess(pid_t pid);
    // The session's egress listener (at most one), if open.
    std::vector<EgressListener*> egressListeners();
    void sendReset(std::uint32_t stream, const std::string& code, const std::string& message);
    void dropSessionStreams();

    std::string portName_;
    PortChannel port_;
    UniqueFd signalFd_;
    UniqueFd stopFd_;  // eventfd written by stop()
    UniqueFd vsockListener_;  // vsock transport: hosts connect here, one at a time
    bool stopping_ = false;
    protocol::FrameDecoder decoder_;
    bool hostConnected_ = false;
    bool sessionOpen_ = false;  // a hello was answered on this connection
    std::uint64_t epoch_ = 0;
    std::map<std::uint32_t, std::unique_ptr<StreamHandler>> streams_;
    std::unique_ptr<ChannelBaseline> baseline_;
    BaselinePort baselinePort_;
    ProcessTable processes_;
    std::unique_ptr<FileActivity> activity_;
};

}  // namespace airlock::guest

#pragma once
#include <poll.h>

#include <cstdint>
#include <nlohmann/json.hpp>

#include "protocol/ControlFrames.hpp"
#include <string>
#include <string_view>
#include <vector>

#include "protocol/Frame.hpp"

namespace airlock::guest {

// Where handlers send frames: the agent's port queue.
class FrameSink {
  public:
    virtual ~FrameSink() = default;
    virtual void sendFrame(protocol::FrameType type, std::uint32_t stream, std::string_view payload,
                           std::uint8_t flags = 0) = 0;
    // False while the port queue is above its high-water mark: stop producing.
    virtual bool outputRoom() const = 0;
};

class StreamHandler;

// What one poll() turn watches: an fd, its events and who owns it.
struct PollSet {
    std::vector<pollfd> fds;
    std::vector<StreamHandler*> owners;
    void add(int fd, short events, StreamHandler* owner) {
        fds.push_back({fd, events, 0});
        owners.push_back(owner);
    }
};

// One multiplexed stream, agent side. Credit rules: the agent may send at
// most the window the host granted (sendCredit_), and the host may send at
// most the window the agent granted (recvCredit_); a peer that overruns a
// window is a protocol violation and the stream is reset.
class StreamHandler {
  public:
    StreamHandler(std::uint32_t id, FrameSink& sink) : id_(id), sink_(sink) {}
    virtual ~StreamHandler() = default;
    StreamHandler(const StreamHandler&) = delete;
    StreamHandler& operator=(const StreamHandler&) = delete;

    std::uint32_t id() const { return id_; }
    bool done() const { return done_; }

    virtual void collectFds(PollSet&) {}
    virtual void onFdReady(int /*fd*/, short /*revents*/) {}
    virtual void onData(std::uint8_t channel, std::string bytes);
    virtual void onCloseWrite() {}
    // A control frame from the host, read as one of protocol/ControlFrames.
    virtual void onControl(const protocol::ControlFrame&) {}
    // Called once per loop turn: timeouts, pulling from process logs, finishing.
    virtual void tick(std::int64_t /*nowMs*/) {}
    virtual std::int64_t nextDeadlineMs() const { return 0; }
    // True when tick() could send right now (sources without a pollable fd):
    // the loop then does not sleep.
    virtual bool readyToProduce() const { return false; }

    void addCredit(std::uint32_t credit);
    // Receives host data after the window check; false when the host overran it.
    bool acceptIncoming(std::size_t bytes);
    void fail(const std::string& code, const std::string& message);

  protected:
    // How many bytes may be sent now (0: wait for credit or port room).
    std::size_t sendable() const;
    void sendData(std::uint8_t channel, std::string_view bytes);
    void sendControl(const protocol::ControlFrame& frame);
    void finish(const nlohmann::json& result);
    // Returns window to the host for bytes this stream consumed.
    void grant(std::size_t bytes);

    std::uint32_t id_;
    FrameSink& sink_;

  private:
    std::uint64_t sendCredit_ = protocol::kInitialWindow;
    std::uint64_t recvCredit_ = protocol::kInitialWindow;
    bool done_ = false;
};

}  // namespace airlock::guest

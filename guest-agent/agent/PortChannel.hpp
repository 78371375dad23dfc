#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include "core/UniqueFd.hpp"
#include "protocol/Frame.hpp"

namespace airlock::guest {

// The guest end of the virtio-serial port. Never blocks: while no host is
// connected the port reports POLLHUP and writes would stall, so output is
// queued here (bounded) and flushed when the host is back.
class PortChannel {
public:
    static constexpr std::size_t kMaxQueued = 8 * 1024 * 1024;

    // Finds /dev/vportNpM whose sysfs name is `portName`; empty if none yet.
    static std::string findPortDevice(const std::string& portName);

    bool open(const std::string& devicePath);
    void adopt(UniqueFd fd);
    int fd() const { return fd_.get(); }

    // Appends to the outgoing queue; false when the queue is full.
    bool enqueue(std::string_view bytes);
    // One frame, encoded straight into the queue.
    bool enqueueFrame(protocol::FrameType type, std::uint32_t stream, std::string_view payload,
                      std::uint8_t flags);
    std::size_t queued() const { return out_.size() - outOffset_; }
    void dropQueued();
    // Writes as much as the port accepts now. Returns false on a hard error.
    bool flush();
    // Reads what is available into `into`. Returns bytes read, 0 if nothing, -1 on error.
    long readSome(std::string& into, std::size_t max);

private:
    UniqueFd fd_;
    std::string out_;
    std::size_t outOffset_ = 0;
};

}  // namespace airlock::guest

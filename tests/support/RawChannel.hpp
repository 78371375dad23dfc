#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/UniqueFd.hpp"
#include "protocol/FrameDecoder.hpp"

namespace airlock::test {

// The bare agent channel, for the channel bench's baseline only: a session
// of its own with the agent (the controller's must be closed first: the
// channel takes one host at a time), framed just long enough to ask the
// agent for raw mode (only airlock-agent-rawbench serves it). Blocking
// I/O with deadlines; nothing of it is in airlockd.
class RawChannel {
  public:
    RawChannel(const std::string& endpoint, std::chrono::milliseconds wait);
    // Over a connected channel (a unit test's socketpair with the agent).
    RawChannel(UniqueFd channel, std::chrono::milliseconds wait);
    // sink: `bytes` raw bytes to the agent; source: the agent sends them;
    // echo: `bytes` one-byte round trips (one time each; the others one in all).
    std::vector<std::chrono::nanoseconds> run(const std::string& mode, std::uint64_t bytes,
                                              std::chrono::milliseconds wait);
    // A framed ping answered: the channel is framed again.
    bool ping(std::chrono::milliseconds wait);

  private:
    using Deadline = std::chrono::steady_clock::time_point;
    void writeAll(std::string_view bytes, Deadline deadline);
    // Reads what is there (at least one byte) into raw_.
    void readSome(Deadline deadline);
    protocol::Frame nextFrame(Deadline deadline);
    void waitRaw(std::uint64_t count, Deadline deadline);
    void hello(Deadline deadline);

    UniqueFd fd_;
    protocol::FrameDecoder decoder_;
    std::string raw_;  // raw bytes read and not yet counted
    std::uint32_t nextStream_ = 1;
};

}  // namespace airlock::test

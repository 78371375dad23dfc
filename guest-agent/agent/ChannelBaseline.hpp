#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/Frame.hpp"

namespace airlock::guest {

// What a baseline may do with the agent's port.
struct BaselinePort {
    std::function<void(std::string_view)> writeRaw;  // bytes past the framing
    std::function<std::size_t()> queued;             // bytes not yet written out
    std::function<void(protocol::FrameType, std::uint32_t, std::string_view)> sendFrame;
};

// A benchmark's own use of the agent's channel, to measure the bare channel
// against the protocol on top of it. Only the bench's agent build installs
// one (airlock-agent-rawbench); the production agent has none, and refuses
// its op as any unknown op.
class ChannelBaseline {
  public:
    struct Refusal {
        std::string code, message;
    };
    virtual ~ChannelBaseline() = default;
    // The op name it answers (outside the shared op set).
    virtual bool claims(std::string_view op) const = 0;
    // Takes the channel on `stream`, or says why not (the channel must be
    // idle: no other stream open).
    virtual std::optional<Refusal> start(std::uint32_t stream, std::string_view openPayload,
                                         bool channelIdle, BaselinePort& port) = 0;
    // While it holds the channel, every byte read from the port is offered
    // here first; returns how many it took (the rest is framing again).
    virtual bool active() const = 0;
    virtual std::size_t consume(std::string_view bytes, BaselinePort& port) = 0;
    // Writes what it produces, within the port's room; called every round.
    virtual void pump(BaselinePort& port, std::size_t highWater) = 0;
    // True when pump() has more to write at once (the loop must not sleep).
    virtual bool wantsToWrite(const BaselinePort& port, std::size_t highWater) const = 0;
};

}  // namespace airlock::guest

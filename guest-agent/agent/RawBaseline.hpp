#pragma once
#include "agent/ChannelBaseline.hpp"

namespace airlock::guest {

// Op "raw" of the channel bench (airlock-agent-rawbench only): after its
// open is answered, the channel carries bare bytes until `bytes` are done.
// sink: the host sends them; source: the agent sends them; echo: each byte
// comes back. The close then reports the guest's own time in ms.
class RawBaseline : public ChannelBaseline {
  public:
    static constexpr std::string_view kOp = "raw";
    bool claims(std::string_view op) const override { return op == kOp; }
    std::optional<Refusal> start(std::uint32_t stream, std::string_view openPayload,
                                 bool channelIdle, BaselinePort& port) override;
    bool active() const override { return mode_ != Mode::framing; }
    std::size_t consume(std::string_view bytes, BaselinePort& port) override;
    void pump(BaselinePort& port, std::size_t highWater) override;
    bool wantsToWrite(const BaselinePort& port, std::size_t highWater) const override;

  private:
    enum class Mode { framing, sink, source, echo };
    void finish(BaselinePort& port);

    std::uint32_t stream_ = 0;
    Mode mode_ = Mode::framing;
    std::uint64_t remaining_ = 0;
    std::int64_t startedMs_ = 0;
};

}  // namespace airlock::guest

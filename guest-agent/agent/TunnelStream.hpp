#pragma once
#include <string>

#include "agent/StreamHandler.hpp"
#include "core/UniqueFd.hpp"

namespace airlock::guest {

// A byte tunnel to 127.0.0.1:PORT inside the guest (preview ports) or of an
// accepted egress connection: host data (channel 0) goes to the socket,
// socket bytes come back on channel 1.
class TunnelStream : public StreamHandler {
public:
    TunnelStream(std::uint32_t id, FrameSink& sink, const nlohmann::json& request);
    // An already connected socket (egress: a guest client's connection to
    // the proxy listener), tunnelled the same way.
    TunnelStream(std::uint32_t id, FrameSink& sink, UniqueFd connected);
    void collectFds(PollSet& set) override;
    void onFdReady(int fd, short revents) override;
    void onData(std::uint8_t channel, std::string bytes) override;
    void onCloseWrite() override;
    void tick(std::int64_t nowMs) override;

private:
    void start(const nlohmann::json& request);
    void flushToSocket();
    UniqueFd sock_;
    bool connected_ = false;
    bool readEof_ = false;
    bool hostEof_ = false;
    std::string pending_;
};

}  // namespace airlock::guest

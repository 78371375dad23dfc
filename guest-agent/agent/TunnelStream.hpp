#pragma once
#include <string>

#include "agent/StreamHandler.hpp"
#include "core/UniqueFd.hpp"

namespace airlock::guest {

// A byte tunnel to 127.0.0.1:PORT inside the guest (preview ports): host
// data (channel 0) goes to the socket, socket bytes come back on channel 1.
class TunnelStream : public StreamHandler {
public:
    TunnelStream(std::uint32_t id, FrameSink& sink, const nlohmann::json& request);
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

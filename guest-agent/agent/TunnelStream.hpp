#pragma once
#include <string>

#include "protocol/GuestCalls.hpp"
#include "agent/StreamHandler.hpp"
#include "core/UniqueFd.hpp"

namespace airlock::guest {

// A byte tunnel to 127.0.0.1:PORT inside the guest (preview ports) or of an
// accepted egress connection: host data (channel 0) goes to the socket,
// socket bytes come back on channel 1.
class TunnelStream : public StreamHandler {
  public:
    TunnelStream(std::uint32_t id, FrameSink& sink, const protocol::PortRequest& request);
    // An already connected socket (egress: a guest client's connection to
    // the proxy listener), tunnelled the same way but with half-closes: the
    // client's EOF is a control {"eof":true} and the stream lives on until
    // the host has closed its side too (a client may shut down its writes
    // and still wait for the answer).
    TunnelStream(std::uint32_t id, FrameSink& sink, UniqueFd connected);
    void collectFds(PollSet& set) override;
    void onFdReady(int fd, short revents) override;
    void onData(std::uint8_t channel, std::string bytes) override;
    void onCloseWrite() override;
    void tick(std::int64_t nowMs) override;

  private:
    void start(unsigned port);
    void flushToSocket();
    UniqueFd sock_;
    bool connected_ = false;
    bool readEof_ = false;
    bool hostEof_ = false;
    bool halfClose_ = false;
    bool eofSent_ = false;
    bool broken_ = false;  // the socket failed: the stream is over
    std::string pending_;
};

}  // namespace airlock::guest

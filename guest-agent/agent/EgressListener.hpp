#pragma once
#include <cstdint>
#include <map>

#include "protocol/GuestCalls.hpp"
#include "agent/StreamHandler.hpp"
#include "core/UniqueFd.hpp"

namespace airlock::guest {

// The guest end of egress and of the package proxy (op "egress_listen", one
// listener per port: the egress proxy's and each package ecosystem's): a TCP listener on
// 127.0.0.1:PORT that commands reach through http_proxy/https_proxy. The
// guest has no network interface but lo; every connection accepted here is
// announced to the host ({"accepted":N} control) and waits until the host
// opens an "egress_attach" stream for it, which becomes a byte tunnel to
// airlockd's proxy. The host decides; the guest only carries bytes.
class EgressListener : public StreamHandler {
  public:
    static constexpr std::size_t kMaxPending = 64;
    static constexpr std::int64_t kPendingTimeoutMs = 15'000;

    EgressListener(std::uint32_t id, FrameSink& sink, const protocol::PortRequest& request);
    void collectFds(PollSet& set) override;
    void onFdReady(int fd, short revents) override;
    void tick(std::int64_t nowMs) override;
    void onCloseWrite() override;

    // Hands an announced connection to its attach stream; empty if unknown
    // (never announced, already attached or expired).
    UniqueFd take(std::uint64_t connection);

  private:
    void listen(int port);
    struct Pending {
        UniqueFd fd;
        std::int64_t acceptedMs = 0;
    };
    UniqueFd listener_;
    std::map<std::uint64_t, Pending> pending_;
};

}  // namespace airlock::guest

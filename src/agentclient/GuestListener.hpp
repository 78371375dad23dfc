#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "agentclient/AgentConnection.hpp"

namespace airlock {

// A TCP listener the agent opens in the guest (op egress_listen) on the
// host's behalf: the guest accepts, the host is told each connection's id
// and opens its byte stream itself. Used by the egress proxy and the
// package proxy.
struct GuestListener {
    // Both run on the agent connection's reader thread: they must not
    // block. Nothing they or the guest do escapes it.
    using OnAccepted = std::function<void(std::uint64_t connection)>;
    using OnEnded = std::function<void(const std::string& why)>;

    std::shared_ptr<AgentStream> stream;  // the listener lives as long as it
    unsigned port = 0;                    // the port the guest listens on

    // Opens it on `port` and waits for the guest's answer. Throws
    // Error(agent_timeout) or Error(agent_error) naming `what`
    // ("egress proxy listener").
    static GuestListener open(AgentConnection& agent, unsigned port, const std::string& what,
                              OnAccepted onAccepted, OnEnded onEnded = nullptr,
                              std::chrono::seconds wait = std::chrono::seconds(10));
};

}  // namespace airlock

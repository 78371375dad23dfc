#pragma once
#include <memory>
#include <thread>

#include "agent/Agent.hpp"
#include "agentclient/AgentConnection.hpp"

namespace airlock::test {

// The real guest agent's event loop, run in a thread of the test process
// and reached through a socketpair instead of virtio-serial. Commands run on
// the host, so tests ask for user "root" (the host has no user "user").
class InProcessAgent {
public:
    // withRawBaseline: as airlock-agent-rawbench, serving the channel
    // bench's raw op (its unit test).
    explicit InProcessAgent(bool withRawBaseline = false);
    ~InProcessAgent();
    // The host end, for AgentConnection::fromFd.
    UniqueFd takeHostEnd() { return std::move(hostEnd_); }
    std::shared_ptr<AgentConnection> connect();

private:
    UniqueFd hostEnd_;
    std::unique_ptr<guest::Agent> agent_;
    std::thread thread_;
};

}  // namespace airlock::test

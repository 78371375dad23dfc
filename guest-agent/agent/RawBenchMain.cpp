// airlock-agent-rawbench: the agent plus the channel bench's raw baseline.
// scripts/bench builds a template of its own with it; no other template
// carries it.
#include <memory>

#include "agent/Agent.hpp"
#include "agent/RawBaseline.hpp"
#include "protocol/Messages.hpp"

int main() {
    airlock::guest::Agent agent(airlock::protocol::kAgentPortName);
    agent.installBaseline(std::make_unique<airlock::guest::RawBaseline>());
    return agent.run();
}

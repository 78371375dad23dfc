#include "agent/Agent.hpp"
#include "protocol/Messages.hpp"

int main() {
    airlock::guest::Agent agent(airlock::protocol::kAgentPortName);
    return agent.run();
}

#include "agent/Agent.hpp"
#include "protocol/Messages.hpp"

int main() { return airlock::guest::Agent(airlock::protocol::kAgentPortName).run(); }

#include <fstream>
#include <sstream>

#include "agent/Agent.hpp"
#include "protocol/Messages.hpp"

int main() {
    airlock::guest::Agent agent(airlock::protocol::kAgentPortName);
    // Only a benchmark's VM boots with this flag (ControllerConfig::benchRawChannel).
    std::ifstream in("/proc/cmdline");
    std::stringstream cmdline;
    cmdline << in.rdbuf();
    agent.allowRawMode((" " + cmdline.str()).find(" airlock.bench_raw=1") != std::string::npos);
    return agent.run();
}

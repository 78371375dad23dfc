#include <cstring>

#include "agent/Agent.hpp"
#include "agent/TerminalJudge.hpp"
#include "protocol/Messages.hpp"

int main(int argc, char** argv) {
    // The hook of a judged terminal runs this binary as its helper.
    if (argc >= 2 && std::strcmp(argv[1], "judge") == 0)
        return airlock::guest::runJudgeClient(argc, argv);
    airlock::guest::Agent agent(airlock::protocol::kAgentPortName);
    return agent.run();
}

#include "support/InProcessAgent.hpp"

#include <sys/socket.h>

#include <stdexcept>

#include "agent/RawBaseline.hpp"

namespace airlock::test {

InProcessAgent::InProcessAgent(bool withRawBaseline) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) throw std::runtime_error("socketpair");
    hostEnd_.reset(fds[0]);
    agent_ = std::make_unique<guest::Agent>(UniqueFd(fds[1]));
    if (withRawBaseline) agent_->installBaseline(std::make_unique<guest::RawBaseline>());
    thread_ = std::thread([this] { agent_->run(); });
}

InProcessAgent::~InProcessAgent() {
    agent_->stop();
    thread_.join();
}

std::shared_ptr<AgentConnection> InProcessAgent::connect() {
    return AgentConnection::fromFd(takeHostEnd(), std::chrono::seconds(5));
}

}  // namespace airlock::test

#pragma once

#include <string>

#include "core/Error.hpp"

namespace airlock {

// The guest broke the protocol before a session existed (during the hello):
// there is no protocol-error handler yet, so the caller that opened the
// session reports it. Maps to agent_error like any other agent failure.
class AgentProtocolError : public Error {
  public:
    explicit AgentProtocolError(const std::string& message)
        : Error(ErrorCode::agent_error, message) {}
};

}  // namespace airlock

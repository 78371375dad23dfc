#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "agentclient/AgentStream.hpp"
#include "controller/SandboxAccess.hpp"
#include "protocol/GuestCalls.hpp"
#include "protocol/GuestResults.hpp"

namespace airlock {

// Background processes in a sandbox: resources with handles that outlive
// any client. A start is judged by the command policy and gets exec's
// defaults (user, environment, scoped secrets); every answer and log the
// guest wrote is masked. No state of its own: the guest keeps the table.
class GuestProcesses {
  public:
    explicit GuestProcesses(SandboxAccess& sandboxes) : sandboxes_(sandboxes) {}

    // The guest's description of the started process.
    protocol::ProcessInfo start(const std::string& tenant, const std::string& id,
                                const ExecOptions& options, bool stdinOpen);
    protocol::ProcessList list(const std::string& tenant, const std::string& id);
    // get, signal or stdin: nothing else reaches the agent through here.
    protocol::ProcessInfo call(const std::string& tenant, const std::string& id,
                               const protocol::ProcessCall& call);
    std::shared_ptr<AgentStream> openLogs(const std::string& tenant, const std::string& id,
                                          const std::string& processId, bool follow,
                                          AgentStream::Handler handler);

  private:
    SandboxAccess& sandboxes_;
};

}  // namespace airlock

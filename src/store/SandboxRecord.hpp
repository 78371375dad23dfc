#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace airlock {

enum class SandboxState { creating, running, stopped, error, deleting };
std::string sandboxStateName(SandboxState s);
SandboxState parseSandboxState(const std::string& s);

// What the store keeps about a sandbox; the controller's source of truth
// across restarts.
struct SandboxRecord {
    std::string id;
    std::string tenant;
    std::string templateName;
    SandboxState state = SandboxState::creating;
    unsigned vcpus = 1;
    unsigned memoryMib = 256;
    std::string createdAt;
    std::string metadataJson = "{}";  // client-supplied string map
    std::string envJson = "{}";       // default environment for every exec
    std::string error;                // why it is in state error
};

}  // namespace airlock

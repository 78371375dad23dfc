#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "store/AuditStore.hpp"
#include "store/PortStore.hpp"
#include "store/SandboxRecord.hpp"

namespace airlock {

// What crosses from one host to another when a sandbox moves (a drain with
// move), besides its memory and disk files: its record (its secrets sealed
// for the journey, not with either host's key), its audit log and its
// exposed ports. Only nodes of one fleet exchange it, under the node
// credential; it is still parsed strictly.
struct MovedSandbox {
    SandboxRecord record;
    std::string templateDigest;  // the memory image runs only on this build of the template
    bool paused = false;         // paused (with its memory) when it left
    std::vector<AuditEvent> audit;
    std::vector<ExposedPort> ports;
    // Its repository workspace's record as the host keeps it ("": none);
    // the host's commits travel as a file beside its state.
    std::string workspace;

    nlohmann::json toJson() const;
    // Error(bad_request) for anything but what toJson wrote.
    static MovedSandbox fromJson(const nlohmann::json& j);
};

}  // namespace airlock

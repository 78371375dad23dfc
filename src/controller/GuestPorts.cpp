#include "controller/GuestPorts.hpp"

#include "core/Error.hpp"
#include "protocol/GuestCalls.hpp"

namespace airlock {

void GuestPorts::requireReachable(unsigned port) const {
    for (unsigned p : internal_)
        if (p == port)
            throw Error(ErrorCode::forbidden,
                        "guest port " + std::to_string(port) +
                            " is Airlock's own (egress or package proxy) and is never reachable "
                            "from outside the sandbox");
}

ExposedPort GuestPorts::expose(const std::string& tenant, const std::string& id, unsigned port) {
    sandboxes_.requireOwned(tenant, id);
    requireReachable(port);
    return previews_.expose(id, port);
}

std::vector<ExposedPort> GuestPorts::list(const std::string& tenant, const std::string& id) {
    sandboxes_.requireOwned(tenant, id);
    return previews_.list(id);
}

void GuestPorts::close(const std::string& tenant, const std::string& id, unsigned port) {
    sandboxes_.requireOwned(tenant, id);
    previews_.close(id, port);
}

std::shared_ptr<AgentStream> GuestPorts::openPreview(const std::string& sandboxId, unsigned port,
                                                     const std::string& token,
                                                     AgentStream::Handler handler) {
    requireReachable(port);  // also a port exposed before it was refused
    if (!previews_.admits(sandboxId, port, token))
        throw Error(ErrorCode::not_found, "no such preview");
    auto r = sandboxes_.find(sandboxId);
    // A capability holder's request wakes a sandbox asleep with auto_resume.
    if (r && r->state == SandboxState::paused && r->autoResume)
        r = sandboxes_.requireRunning(r->tenant, sandboxId);
    if (!r || r->state != SandboxState::running)
        throw Error(ErrorCode::conflict, "the sandbox is not running");
    return sandboxes_.agentFor(sandboxId)->open(protocol::PortRequest{protocol::Op::tunnel, port},
                                                std::move(handler));
}

std::shared_ptr<AgentStream> GuestPorts::openTunnel(const std::string& tenant,
                                                    const std::string& id, unsigned port,
                                                    AgentStream::Handler handler) {
    if (port == 0 || port > 65535) throw Error(ErrorCode::bad_request, "port must be 1-65535");
    requireReachable(port);
    auto r = sandboxes_.requireOwned(tenant, id);
    if (r.state == SandboxState::paused && r.autoResume) r = sandboxes_.requireRunning(tenant, id);
    if (r.state != SandboxState::running)
        throw Error(ErrorCode::conflict, "the sandbox is not running");
    return sandboxes_.agentFor(id)->open(protocol::PortRequest{protocol::Op::tunnel, port},
                                         std::move(handler));
}

}  // namespace airlock

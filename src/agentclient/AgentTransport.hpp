#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "core/UniqueFd.hpp"

namespace airlock {

class AgentConnection;

// How the host reaches a guest agent. Both carry the same framed protocol
// over one byte stream; only the way to open that stream differs.
enum class AgentTransportKind { serial, vsock };

// "auto" picks vsock only when the host has /dev/vhost-vsock; a host
// without it (TCG only) gets serial.
AgentTransportKind resolveAgentTransport(const std::string& requested, bool vhostVsockPresent);
bool hostHasVhostVsock();

inline constexpr unsigned kAgentVsockPort = 1024;

// An endpoint as one string: a unix socket path (virtio-serial through QEMU)
// or "vsock:CID:PORT".
std::string vsockEndpoint(unsigned cid, unsigned port = kAgentVsockPort);

// Opens one byte stream to the endpoint; invalid fd when it is not there yet.
UniqueFd openAgentStream(const std::string& endpoint);

// Retries openAgentStream until it connects, then does the hello handshake.
std::shared_ptr<AgentConnection> connectAgent(const std::string& endpoint, std::chrono::milliseconds timeout);

}  // namespace airlock

#include "agentclient/AgentTransport.hpp"

#include <linux/vm_sockets.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "agentclient/AgentConnection.hpp"
#include "core/Error.hpp"

namespace airlock {

AgentTransportKind resolveAgentTransport(const std::string& requested, bool vhostVsockPresent) {
    if (requested == "serial") return AgentTransportKind::serial;
    if (requested == "vsock") {
        if (!vhostVsockPresent) throw Error(ErrorCode::bad_request, "--agent-transport vsock needs /dev/vhost-vsock on the host");
        return AgentTransportKind::vsock;
    }
    if (requested != "auto") throw Error(ErrorCode::bad_request, "--agent-transport must be auto, serial or vsock");
    return vhostVsockPresent ? AgentTransportKind::vsock : AgentTransportKind::serial;
}

bool hostHasVhostVsock() { return std::filesystem::exists("/dev/vhost-vsock"); }

std::string vsockEndpoint(unsigned cid, unsigned port) {
    return "vsock:" + std::to_string(cid) + ":" + std::to_string(port);
}

UniqueFd openAgentStream(const std::string& endpoint) {
    if (endpoint.rfind("vsock:", 0) == 0) {
        unsigned cid = 0, port = 0;
        if (std::sscanf(endpoint.c_str(), "vsock:%u:%u", &cid, &port) != 2)
            throw Error(ErrorCode::internal, "bad vsock endpoint " + endpoint);
        UniqueFd fd(::socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (!fd) throw Error(ErrorCode::unavailable, std::string("AF_VSOCK unavailable: ") + std::strerror(errno));
        sockaddr_vm addr{};
        addr.svm_family = AF_VSOCK;
        addr.svm_cid = cid;
        addr.svm_port = port;
        if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return {};
        return fd;
    }
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return {};
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (endpoint.size() >= sizeof addr.sun_path) throw Error(ErrorCode::internal, "agent socket path too long: " + endpoint);
    std::memcpy(addr.sun_path, endpoint.c_str(), endpoint.size() + 1);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return {};
    return fd;
}

std::shared_ptr<AgentConnection> connectAgent(const std::string& endpoint, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    // The socket (or the guest's vsock listener) appears when the VM is up; until then, retry.
    while (true) {
        UniqueFd fd = openAgentStream(endpoint);
        if (fd) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            return AgentConnection::fromFd(std::move(fd), std::max(left, std::chrono::milliseconds(1)));
        }
        if (std::chrono::steady_clock::now() >= deadline)
            throw Error(ErrorCode::agent_timeout, "agent endpoint " + endpoint + " did not accept a connection in time");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

}  // namespace airlock

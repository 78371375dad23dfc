#pragma once
#include <atomic>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/Authenticator.hpp"
#include "e2b/E2bWatchers.hpp"
#include "api/ConnectStreamSession.hpp"
#include "api/HttpTypes.hpp"
#include "api/RouteTable.hpp"
#include "api/TenantLimiter.hpp"
#include "controller/GuestFiles.hpp"
#include "controller/GuestPorts.hpp"
#include "controller/SandboxCommands.hpp"
#include "controller/Sandboxes.hpp"
#include "e2b/E2bProcesses.hpp"
#include "e2b/E2bWire.hpp"
#include "protocol/GuestCalls.hpp"
#include "protocol/GuestResults.hpp"

namespace airlock::api {

// E2B's in-sandbox daemon (envd), served by airlockd: a request names its
// sandbox with E2b-Sandbox-Id / E2b-Sandbox-Port, or a Host of
// <port>-<id>.<public domain>. Its rows are in the one route table
// (Door::e2b_envd, authenticated by the sandbox's X-Access-Token; and
// Door::e2b_port for every other guest port). The Connect RPCs of
// process.Process and filesystem.Filesystem (JSON codec) and GET/POST
// /files and GET /health become the same controller calls as the native
// API's (policy, audit, write scopes, masking included).
// What envd reaches of the sandboxes, and no more.
struct EnvdSandboxes {
    Sandboxes& lifecycle;
    GuestFiles& files;
    GuestPorts& ports;
    SandboxCommands& commands;
};

class E2bEnvd {
  public:
    // auth: the keys a traffic token names (a token works while its key does).
    E2bEnvd(EnvdSandboxes sandboxes, const e2b::SandboxTokens& tokens, Authenticator& auth,
            TenantLimiter& limiter, boost::asio::thread_pool& workers, std::string publicDomain);

    struct Target {
        std::string sandboxId;
        unsigned port = 0;
        std::string token;  // Airlock's own preview origin: the exposed port's token
        bool envd() const { return port == e2b::kEnvdPort && token.empty(); }
    };
    // The sandbox and port a request is for; nullopt: not an E2B sandbox
    // request (the native API's). Error(bad_request) for a half-given pair.
    std::optional<Target> target(const ApiRequest& head) const;

    // envd's rows (Door::e2b_envd) and the guest ports' (Door::e2b_port).
    void addRoutes(RouteTable& table);

    // A guest port by Host or headers: E2B's access rule for sandboxes made
    // through the E2B door (public, or with the traffic token header), the
    // exposed port's token for every other. Throws a typed Error.
    struct PortRoute {
        std::string tenant;
        std::function<std::shared_ptr<AgentStream>(AgentStream::Handler)> open;
    };
    PortRoute routePort(const ApiRequest& head, const Target& target);
    // As E2B's proxy answers before anything else: the record of a sandbox
    // that runs, else Error(sandbox_unreachable) saying it is gone or paused.
    SandboxRecord runningSandbox(const std::string& sandboxId);
    // As runningSandbox, but also a paused one that traffic wakes (E2B's
    // auto-resume); awake() resumes it once the caller's access was checked.
    SandboxRecord reachableSandbox(const std::string& sandboxId);
    static bool wakes(const SandboxRecord& r);
    SandboxRecord awake(SandboxRecord r);
    // GET and POST /files without X-Access-Token, as envd takes them: a
    // signed URL (the SDK's downloadUrl/uploadUrl), whose signature is made
    // with the envd token of a key that drives the sandbox. Returns that
    // key's id; Error(unauthorized) with envd's words otherwise.
    static bool isFilesRequest(const ApiRequest& head);
    std::string signedUrlKey(const ApiRequest& head, const std::string& sandboxId,
                             const std::string& owner);
    // A signed /files URL with no sandbox named (one URL for all
    // sandboxes): the running sandbox whose token signed it, else
    // Error(unauthorized).
    std::string sandboxSigning(const ApiRequest& head) const;

    e2b::E2bProcessTable& processes() { return processes_; }

  private:
    struct SignedUrl {
        std::string signature, operation, path, user;
        std::optional<std::int64_t> expiration;
    };
    static SignedUrl signedUrlOf(const ApiRequest& head);
    // The driving key whose token for this sandbox made the signature.
    std::optional<std::string> signingKey(const SignedUrl& url, const std::string& sandboxId,
                                          const std::vector<Principal>& drivers) const;
    // Who acts inside the sandbox: its tenant, with the user the call names.
    struct Caller {
        std::string tenant, sandboxId, user;
    };
    static Caller callerOf(const ApiRequest& request, const std::string& tenant,
                           const std::string& sandboxId);
    ApiResponse health(RouteContext& c);
    nlohmann::json unaryRpc(const std::string& method, const nlohmann::json& body,
                            const Caller& caller);
    ConnectStreamPlan planStream(RouteContext& c);
    std::optional<ApiResponse> download(StreamHandover& h);
    // The e2b_port row: routePort, then the connection is proxied.
    std::optional<ApiResponse> proxyPort(StreamHandover& h);
    // One file-system operation as the caller's user.
    protocol::FsResult fsCall(const Caller& caller, protocol::FsRequest::Action action,
                              const std::string& path, const std::string& to = "",
                              bool recursive = false);
    nlohmann::json listDir(const Caller& caller, const std::string& path, unsigned depth);
    // POST /files: streamed to the guest (UploadSession), a file per part.
    std::optional<ApiResponse> upload(StreamHandover& h);
    // process.Process/StreamInput: Connect client streaming (a start event
    // naming the process, then data events, keepalives), each event sent to
    // the guest before the next is read.
    std::optional<ApiResponse> streamInput(StreamHandover& h);
    std::shared_ptr<e2b::E2bProcess> selected(const Caller& caller, const nlohmann::json& body);
    // A token's minting key (nullopt: no valid token) still lives and may act
    // on the owner's sandbox.
    bool mintingKeyActs(const std::optional<std::string>& keyId, const std::string& owner);

    EnvdSandboxes sandboxes_;
    const e2b::SandboxTokens& tokens_;
    Authenticator& auth_;
    TenantLimiter& limiter_;
    boost::asio::thread_pool& workers_;
    std::string publicDomain_;
    e2b::E2bProcessTable processes_;
    e2b::E2bWatchers watchers_;
};

}  // namespace airlock::api

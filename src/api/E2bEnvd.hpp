#pragma once
#include <atomic>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "api/Authenticator.hpp"
#include "api/ConnectStreamSession.hpp"
#include "api/HttpTypes.hpp"
#include "api/TenantLimiter.hpp"
#include "controller/SandboxController.hpp"
#include "e2b/E2bProcesses.hpp"
#include "e2b/E2bWire.hpp"
#include "protocol/GuestCalls.hpp"
#include "protocol/GuestResults.hpp"

namespace airlock::api {

// E2B's in-sandbox daemon (envd), served by airlockd on its own listener:
// a request names its sandbox with E2b-Sandbox-Id / E2b-Sandbox-Port, or a
// Host of <port>-<id>.<public domain>. Authenticated by the sandbox's
// X-Access-Token. The Connect RPCs of process.Process and
// filesystem.Filesystem (JSON codec) and GET/POST /files and GET /health
// become the same controller calls as the native API's (policy, audit,
// write scopes, masking included).
class E2bEnvd {
  public:
    // auth: the keys an access token names (a token works while its key does).
    E2bEnvd(SandboxController& controller, const e2b::SandboxTokens& tokens, Authenticator& auth,
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
    static bool isStreamingRpc(const ApiRequest& head);
    static bool isDownload(const ApiRequest& head) {
        return head.method == "GET" && head.path == "/files";
    }
    static std::size_t bodyLimit(const ApiRequest& head);

    // Who may act: the sandbox's tenant, with the user the call names.
    struct Caller {
        std::string tenant, sandboxId, user;
        TenantLimiter::Slot slot;
    };
    // Checks the sandbox runs and the access token; throws a typed Error,
    // or GatewayError for a sandbox that is gone or paused (502, as E2B's proxy).
    Caller admit(const ApiRequest& request, const Target& target);
    struct GatewayError : std::runtime_error {
        using std::runtime_error::runtime_error;
    };

    // A guest port by Host or headers: E2B's access rule for sandboxes made
    // through the E2B door (public, or with the traffic token header), the
    // exposed port's token for every other. Throws like admit.
    struct PortRoute {
        std::string tenant;
        TenantLimiter::Slot slot;
        std::function<std::shared_ptr<AgentStream>(AgentStream::Handler)> open;
    };
    PortRoute routePort(const ApiRequest& head, const Target& target);

    // A unary call (RPC, POST /files, GET /health), admitted already (but
    // /health). Never throws; may block.
    ApiResponse handle(const ApiRequest& request, const Target& target,
                       std::optional<Caller> caller);
    // Uploads are read whole before they go to the guest: their bytes in
    // memory at once are bounded (a reservation is held while one is read
    // and written). Empty when the budget is spent (429).
    static constexpr std::size_t kUploadBudget = 512ull * 1024 * 1024;
    std::shared_ptr<void> reserveUpload(std::size_t bytes);
    // The response for a failure, in the route's shape (Connect error JSON
    // for RPCs, {"code","message"} for the HTTP endpoints).
    ApiResponse errorFor(const ApiRequest& request, std::exception_ptr error,
                         const std::string& sandboxId) const;

    // A streaming RPC, parsed and admitted: run() feeds the session (on a
    // worker), ending it with an error when the call fails.
    struct StreamPlan {
        std::chrono::seconds keepalive{90};
        std::string keepaliveJson;
        std::optional<std::chrono::milliseconds> deadline;
        std::shared_ptr<void> slot;
        std::function<void(const std::shared_ptr<ConnectStreamSession>&)> run;
    };
    StreamPlan planStream(const ApiRequest& request, Caller caller);
    // GET /files: admitted, the path resolved for the user.
    struct Download {
        Caller caller;
        std::string path;
    };
    Download planDownload(const ApiRequest& request, const Target& target);

    e2b::E2bProcessTable& processes() { return processes_; }

  private:
    nlohmann::json unaryRpc(const std::string& method, const nlohmann::json& body,
                            const Caller& caller);
    // One file-system operation as the caller's user.
    protocol::FsResult fsCall(const Caller& caller, protocol::FsRequest::Action action,
                              const std::string& path, const std::string& to = "",
                              bool recursive = false);
    nlohmann::json listDir(const Caller& caller, const std::string& path, unsigned depth);
    ApiResponse upload(const ApiRequest& request, const Caller& caller);
    void writeFile(const Caller& caller, const std::string& path, const std::string& data);
    std::shared_ptr<e2b::E2bProcess> selected(const Caller& caller, const nlohmann::json& body);
    // A token's minting key (nullopt: no valid token) still lives and may act
    // on the owner's sandbox.
    bool mintingKeyActs(const std::optional<std::string>& keyId, const std::string& owner);

    SandboxController& controller_;
    const e2b::SandboxTokens& tokens_;
    Authenticator& auth_;
    TenantLimiter& limiter_;
    boost::asio::thread_pool& workers_;
    std::string publicDomain_;
    e2b::E2bProcessTable processes_;
    std::shared_ptr<std::atomic<std::size_t>> uploadBytes_ =
        std::make_shared<std::atomic<std::size_t>>(0);
};

}  // namespace airlock::api

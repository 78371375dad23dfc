#pragma once
#include <boost/asio/thread_pool.hpp>

#include "../controller/ControllerFixture.hpp"
#include "api/E2bApi.hpp"
#include "api/E2bEnvd.hpp"
#include "api/McpServer.hpp"
#include "api/Router.hpp"
#include "store/ApiKeyStore.hpp"

namespace airlock::api {

// Every front door's rows in one router, as airlockd wires them, over the
// fake hypervisor: the native API, E2B's control plane, envd and ports.
class FrontDoorsFixture : public test::ControllerFixture {
  protected:
    FrontDoorsFixture()
        : keys(*db),
          auth(keys),
          router(controller->frontDoorServices(), auth, keys, "test"),
          tokens("test-key"),
          e2b(controller->frontDoorServices(), tokens, "sbx.test"),
          envd(EnvdSandboxes{controller->sandboxes(), controller->files(), controller->ports(),
                             controller->commands()},
               tokens, auth, router.limiter(), workers, "sbx.test"),
          mcpTools(controller->frontDoorServices(),
                   [](const std::string&, const std::string&,
                      const std::map<std::string, std::string>&, const std::string&,
                      std::chrono::steady_clock::time_point) { return fleet::HttpAnswer{}; }),
          mcp(mcpTools, "test") {
        router.setE2b(e2b, envd, tokens);
        router.setMcp(mcp);
    }
    ~FrontDoorsFixture() override { workers.join(); }

    ApiKeyStore keys;
    Authenticator auth;
    Router router;
    e2b::SandboxTokens tokens;
    E2bApi e2b;
    boost::asio::thread_pool workers{1};
    E2bEnvd envd;
    McpTools mcpTools;
    McpServer mcp;
};

}  // namespace airlock::api

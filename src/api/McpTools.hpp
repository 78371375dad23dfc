#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/Authenticator.hpp"
#include "controller/FrontDoorServices.hpp"
#include "fleet/HttpExchange.hpp"

namespace airlock::api {

// One tools/call as the MCP server hands it over: who calls (their
// Authorization header goes with every REST call a tool makes, so the route
// table's roles, tenant scope and audit are the REST API's own), how to
// report progress (null without a progress token), and the call's stop
// switch (a notifications/cancelled sets it).
struct McpCall {
    Principal principal;
    std::string authorization;
    std::function<void(double progress, const std::string& message)> progress;
    std::shared_ptr<ExecCancel> cancel = std::make_shared<ExecCancel>();
    std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
};

// A tool's answer: its structured content (an object matching the tool's
// output schema) or a tool error (isError) with a readable text naming the
// Airlock error code.
struct McpToolResult {
    nlohmann::json structured = nlohmann::json::object();
    bool isError = false;
    std::string text;
};

// The MCP tools: each a REST call (or two) made as the caller, so a tool
// does exactly what the route it wraps does; run_command also runs through
// the command service directly so a cancel can kill it. A key is offered
// only the tools its role may call.
class McpTools {
  public:
    using Rest = std::function<fleet::HttpAnswer(
        const std::string& method, const std::string& target,
        const std::map<std::string, std::string>& headers, const std::string& body,
        std::chrono::steady_clock::time_point deadline)>;
    McpTools(FrontDoorServices services, Rest rest);

    // tools/list's tools for a role.
    nlohmann::json list(Role role) const;
    // RpcError(kInvalidParams) for a tool the role is not offered or
    // arguments that do not fit its schema; the tool's failures are results.
    McpToolResult call(const std::string& name, const nlohmann::json& arguments, McpCall& call);

    // Resources: each sandbox's audit log, workspace diff and latest evidence.
    nlohmann::json resources(McpCall& call);
    nlohmann::json resourceTemplates() const;
    // RpcError(kResourceNotFound) for a URI that names nothing of the caller's.
    nlohmann::json readResource(const std::string& uri, McpCall& call);

  private:
    struct Answer {
        int status = 0;
        nlohmann::json body;
        std::string raw;
    };
    struct Tool {
        std::string name, title, description;
        nlohmann::json input, output, annotations;
        unsigned roles = 0;  // the Role bits of the route it wraps
        std::function<McpToolResult(const nlohmann::json&, McpCall&)> run;
    };
    void add(Tool tool) { tools_.push_back(std::move(tool)); }
    void addSandboxTools();
    void addCommandTools();
    void addFileTools();
    void addWorkspaceTools();
    void addApprovalTools();

    Answer rest(McpCall& call, const std::string& method, const std::string& target,
                const nlohmann::json& body = nullptr,
                std::chrono::seconds timeout = std::chrono::seconds(120),
                const std::string& contentType = "application/json");
    // 2xx: the body as the result; else a tool error naming the REST error.
    static McpToolResult fromAnswer(const Answer& a, std::function<nlohmann::json(const nlohmann::json&)> shape);
    McpToolResult runCommand(const nlohmann::json& args, McpCall& call);
    McpToolResult runElsewhere(const std::string& id, const nlohmann::json& body, McpCall& call);
    McpToolResult waitForApproval(const nlohmann::json& args, McpCall& call);
    std::string tenantOf(const McpCall& call, const std::string& sandboxId);

    FrontDoorServices services_;
    Rest rest_;
    std::vector<Tool> tools_;
};

}  // namespace airlock::api

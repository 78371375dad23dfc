#include "api/McpTools.hpp"

#include <future>
#include <thread>

#include "api/ErrorMapping.hpp"
#include "api/RequestParsing.hpp"
#include "api/RouteTable.hpp"
#include "core/AwaitedResult.hpp"
#include "core/Error.hpp"
#include "core/UrlEncode.hpp"
#include "mcp/JsonRpc.hpp"
#include "mcp/ToolArguments.hpp"

namespace airlock::api {
using nlohmann::json;
using mcp::RpcError;

namespace {

constexpr Roles kDrive = kAgentRole | kAdminRole;
constexpr Roles kDecide = kApproverRole | kAdminRole;
constexpr Roles kAny = kAgentRole | kApproverRole | kAdminRole;

json str(std::size_t maxLength = 4096) { return {{"type", "string"}, {"maxLength", maxLength}}; }
json strings() { return {{"type", "array"}, {"maxItems", 256}, {"items", str()}}; }
json object(json properties, std::vector<std::string> required = {}) {
    if (properties.is_null()) properties = json::object();  // {} is null to nlohmann
    json j{{"type", "object"}, {"properties", std::move(properties)}, {"additionalProperties", false}};
    if (!required.empty()) j["required"] = required;
    return j;
}
// An output schema: the fields a result has, more allowed (REST may add some).
json output(json properties) {
    if (properties.is_null()) properties = json::object();
    return {{"type", "object"}, {"properties", std::move(properties)}};
}
json hints(bool readOnly, bool destructive, bool idempotent, bool openWorld) {
    return {{"readOnlyHint", readOnly},
            {"destructiveHint", destructive},
            {"idempotentHint", idempotent},
            {"openWorldHint", openWorld}};
}
const json kSandboxId = {{"type", "string"}, {"maxLength", 64}, {"description", "the sandbox's id (sbx-...)"}};

// A sandbox id as it may go into a path.
std::string idArg(const json& args, const char* key = "sandbox_id") {
    std::string id = args.value(key, "");
    if (id.empty() || id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_") != std::string::npos)
        throw RpcError(mcp::rpc::kInvalidParams, std::string(key) + " is not an id");
    return id;
}

McpToolResult toolError(const std::string& code, const std::string& message) {
    McpToolResult r;
    r.isError = true;
    r.text = code + ": " + message;
    return r;
}

}  // namespace

McpTools::McpTools(FrontDoorServices services, Rest rest)
    : services_(services), rest_(std::move(rest)) {
    addSandboxTools();
    addCommandTools();
    addFileTools();
    addWorkspaceTools();
    addApprovalTools();
}

McpTools::Answer McpTools::rest(McpCall& call, const std::string& method, const std::string& target,
                                const json& body, std::chrono::seconds timeout,
                                const std::string& contentType) {
    std::map<std::string, std::string> headers{{"authorization", call.authorization}};
    std::string text;
    if (!body.is_null()) {
        headers["content-type"] = contentType;
        text = body.is_string() ? body.get<std::string>() : mcp::JsonRpc::dump(body);
    }
    auto a = rest_(method, target, headers, text, std::chrono::steady_clock::now() + timeout);
    if (a.outcome != fleet::HttpOutcome::answered)
        throw Error(ErrorCode::unavailable, "the Airlock API did not answer: " + a.why);
    Answer out;
    out.status = a.status;
    out.raw = std::move(a.body);
    out.body = json::parse(out.raw, nullptr, false);
    if (out.body.is_discarded()) out.body = nullptr;
    return out;
}

McpToolResult McpTools::fromAnswer(const Answer& a, std::function<json(const json&)> shape) {
    if (a.status >= 200 && a.status < 300) {
        McpToolResult r;
        r.structured = shape ? shape(a.body) : (a.body.is_object() ? a.body : json::object());
        return r;
    }
    if (a.body.is_object() && a.body.contains("error") && a.body["error"].is_object())
        return toolError(a.body["error"].value("code", "error"), a.body["error"].value("message", ""));
    return toolError("http_" + std::to_string(a.status), a.raw.substr(0, 300));
}

json McpTools::list(Role role) const {
    json out = json::array();
    unsigned bit = 1u << static_cast<unsigned>(role);
    for (const auto& t : tools_) {
        if (!(t.roles & bit)) continue;
        json j{{"name", t.name},
               {"title", t.title},
               {"description", t.description},
               {"inputSchema", t.input},
               {"outputSchema", t.output},
               {"annotations", t.annotations}};
        out.push_back(std::move(j));
    }
    return out;
}

McpToolResult McpTools::call(const std::string& name, const json& arguments, McpCall& call) {
    unsigned bit = 1u << static_cast<unsigned>(call.principal.role);
    for (const auto& t : tools_) {
        if (t.name != name) continue;
        if (!(t.roles & bit))
            throw RpcError(mcp::rpc::kInvalidParams,
                           "tool " + name + " is not offered to a key of role " +
                               roleName(call.principal.role));
        mcp::ToolArguments::check(t.input, arguments);
        try {
            return t.run(arguments, call);
        } catch (const RpcError&) {
            throw;
        } catch (const Error& e) {
            return toolError(std::string(errorCodeName(e.code())), e.what());
        } catch (const std::exception& e) {
            return toolError("internal", e.what());
        }
    }
    throw RpcError(mcp::rpc::kInvalidParams, "unknown tool: " + name.substr(0, 128));
}

std::string McpTools::tenantOf(const McpCall& call, const std::string& sandboxId) {
    if (call.principal.role != Role::admin) return call.principal.tenant;
    auto owner = services_.sandboxes.ownerOf(sandboxId);
    if (!owner) throw Error(ErrorCode::not_found, "no sandbox " + sandboxId);
    return *owner;
}

// ------------------------------------------------------------------ sandboxes

void McpTools::addSandboxTools() {
    add({"create_sandbox", "Create a sandbox",
         "Boots a microVM sandbox from a template, under a command policy (deny, approve, allow "
         "patterns), with optional egress allowlist, package rules, a repository workspace and a "
         "task. Answers its id.",
         object({{"template", str(128)},
                 {"policy", {{"type", "object"}, {"description", "the command policy: {deny, approve, allow} as in REST"}}},
                 {"network", strings()},
                 {"packages", {{"type", "object"}}},
                 {"task", {{"type", "object"}}},
                 {"timeout", {{"type", "integer"}, {"minimum", 1}, {"maximum", 86400}, {"description", "seconds"}}},
                 {"repo", str(2048)},
                 {"ref", str(256)},
                 {"branch", str(256)},
                 {"credential", str(128)},
                 {"metadata", {{"type", "object"}}}}),
         output({{"id", {{"type", "string"}}}, {"state", {{"type", "string"}}}, {"template", {{"type", "string"}}}}),
         hints(false, false, false, true), kDrive,
         [this](const json& a, McpCall& call) {
             json body = json::object();
             for (const char* k : {"template", "policy", "network", "packages", "task", "metadata"})
                 if (a.contains(k)) body[k] = a[k];
             if (a.contains("timeout")) body["timeout_s"] = a["timeout"];
             if (a.contains("repo")) {
                 json w{{"repo", a["repo"]}};
                 for (const char* k : {"ref", "branch", "credential"})
                     if (a.contains(k)) w[k] = a[k];
                 body["workspace"] = w;
             } else if (a.contains("ref") || a.contains("branch") || a.contains("credential")) {
                 throw RpcError(mcp::rpc::kInvalidParams, "ref, branch and credential need repo");
             }
             return fromAnswer(rest(call, "POST", "/v1/sandboxes", body, std::chrono::seconds(300)),
                               nullptr);
         }});
    add({"list_sandboxes", "List sandboxes", "The caller's sandboxes with their state.",
         object({}), output({{"sandboxes", {{"type", "array"}, {"items", {{"type", "object"}}}}}}),
         hints(true, false, true, false), kAny,
         [this](const json&, McpCall& call) {
             return fromAnswer(rest(call, "GET", "/v1/sandboxes"), nullptr);
         }});
    add({"delete_sandbox", "Delete a sandbox",
         "Destroys the sandbox and its VM (a final evidence bundle is sealed first).",
         object({{"sandbox_id", kSandboxId}}, {"sandbox_id"}),
         output({{"id", {{"type", "string"}}}, {"deleted", {{"type", "boolean"}}}}),
         hints(false, true, true, false), kDrive,
         [this](const json& a, McpCall& call) {
             auto id = idArg(a);
             return fromAnswer(rest(call, "DELETE", "/v1/sandboxes/" + id),
                               [id](const json&) { return json{{"id", id}, {"deleted", true}}; });
         }});
    add({"expose_port", "Expose a port", "A preview URL for a port the sandbox listens on.",
         object({{"sandbox_id", kSandboxId}, {"port", {{"type", "integer"}, {"minimum", 1}, {"maximum", 65535}}}},
                {"sandbox_id", "port"}),
         output({{"url", {{"type", "string"}}}, {"port", {{"type", "integer"}}}}),
         hints(false, false, true, true), kDrive,
         [this](const json& a, McpCall& call) {
             return fromAnswer(rest(call, "POST", "/v1/sandboxes/" + idArg(a) + "/ports",
                                    json{{"port", a["port"]}}),
                               nullptr);
         }});
    add({"seal_evidence", "Seal an evidence bundle",
         "Seals a signed evidence bundle of what the sandbox did (commands, diff, tests, packages, "
         "network) and answers its id and summary.",
         object({{"sandbox_id", kSandboxId}}, {"sandbox_id"}),
         output({{"id", {{"type", "string"}}}, {"summary", {{"type", "object"}}}}),
         hints(false, false, false, false), kDrive,
         [this](const json& a, McpCall& call) {
             return fromAnswer(rest(call, "POST", "/v1/sandboxes/" + idArg(a) + "/evidence", json::object()),
                               nullptr);
         }});
    add({"get_evidence_summary", "Evidence summary",
         "The latest evidence bundle's summary of a sandbox (none when none was sealed).",
         object({{"sandbox_id", kSandboxId}}, {"sandbox_id"}),
         output({{"id", {{"type", "string"}}}, {"summary", {{"type", "object"}}}, {"sealed", {{"type", "boolean"}}}}),
         hints(true, false, true, false), kAny,
         [this](const json& a, McpCall& call) {
             return fromAnswer(rest(call, "GET", "/v1/sandboxes/" + idArg(a) + "/evidence"),
                               [](const json& b) {
                                   const json list = b.value("evidence", json::array());
                                   if (!list.is_array() || list.empty())
                                       return json{{"sealed", false}};
                                   json last = list.back();
                                   last["sealed"] = true;
                                   return last;
                               });
         }});
}

// ------------------------------------------------------------------ commands

void McpTools::addCommandTools() {
    json commandArgs{{"sandbox_id", kSandboxId},
                     {"cmd", {{"type", "array"}, {"minItems", 1}, {"maxItems", 4096}, {"items", str(65536)},
                              {"description", "argv, run without a shell"}}},
                     {"shell", {{"type", "string"}, {"maxLength", 65536}, {"description", "a shell command line (sh -c)"}}},
                     {"cwd", str(4096)},
                     {"env", {{"type", "object"}}},
                     {"timeout", {{"type", "integer"}, {"minimum", 1}, {"maximum", 86400}, {"description", "seconds"}}}};
    json result = output({{"exit_code", {{"type", "integer"}}},
                          {"stdout", {{"type", "string"}}},
                          {"stderr", {{"type", "string"}}},
                          {"state", {{"type", "string"}}},
                          {"approval_id", {{"type", "string"}}},
                          {"class", {{"type", "string"}}},
                          {"reason", {{"type", "string"}}}});
    add({"run_command", "Run a command",
         "Runs a command in the sandbox under its policy and answers exit_code, stdout and stderr "
         "(a non-zero exit is a result). A command the policy holds for a human answers "
         "state pending_approval with approval_id: call wait_for_approval. A denied command is a "
         "tool error naming the rule. A progress token gets progress while it runs; a "
         "cancellation kills it.",
         object(commandArgs, {"sandbox_id"}), result, hints(false, true, false, true), kDrive,
         [this](const json& a, McpCall& call) { return runCommand(a, call); }});
    add({"wait_for_approval", "Wait for an approval",
         "Waits (with progress) until a human decides a held command, then answers the command's "
         "result; a denial or expiry is a tool error.",
         object({{"approval_id", str(64)},
                 {"timeout", {{"type", "integer"}, {"minimum", 1}, {"maximum", 3600}, {"description", "seconds to wait"}}}},
                {"approval_id"}),
         result, hints(true, false, true, false), kDrive,
         [this](const json& a, McpCall& call) { return waitForApproval(a, call); }});
    add({"start_process", "Start a background process",
         "Starts a long-running process (a server, a watcher) and answers its id.",
         object(commandArgs, {"sandbox_id"}), output({{"id", {{"type", "string"}}}}),
         hints(false, true, false, true), kDrive,
         [this](const json& a, McpCall& call) {
             json body = json::object();
             for (const char* k : {"cmd", "shell", "cwd", "env"})
                 if (a.contains(k)) body[k] = a[k];
             if (a.contains("timeout")) body["timeout_s"] = a["timeout"];
             return fromAnswer(rest(call, "POST", "/v1/sandboxes/" + idArg(a) + "/processes", body),
                               [](const json& b) {
                                   json j = b.is_object() ? b : json::object();
                                   if (j.contains("id") && !j["id"].is_string()) j["id"] = j["id"].dump();
                                   return j;
                               });
         }});
    add({"read_process_output", "Read a process's state",
         "A background process's state and exit code.",
         object({{"sandbox_id", kSandboxId}, {"process_id", str(64)}}, {"sandbox_id", "process_id"}),
         output({{"state", {{"type", "string"}}}}), hints(true, false, true, false), kDrive,
         [this](const json& a, McpCall& call) {
             return fromAnswer(rest(call, "GET", "/v1/sandboxes/" + idArg(a) + "/processes/" +
                                                     urlEncode(a["process_id"].get<std::string>())),
                               nullptr);
         }});
    add({"stop_process", "Stop a process", "Sends a signal (TERM by default) to a background process.",
         object({{"sandbox_id", kSandboxId}, {"process_id", str(64)}, {"signal", str(16)}},
                {"sandbox_id", "process_id"}),
         output({}), hints(false, true, true, false), kDrive,
         [this](const json& a, McpCall& call) {
             return fromAnswer(
                 rest(call, "POST",
                      "/v1/sandboxes/" + idArg(a) + "/processes/" +
                          urlEncode(a["process_id"].get<std::string>()) + "/signal",
                      json{{"signal", a.value("signal", "TERM")}}),
                 nullptr);
         }});
}

McpToolResult McpTools::runCommand(const json& a, McpCall& call) {
    auto id = idArg(a);
    if (a.contains("cmd") == a.contains("shell"))
        throw RpcError(mcp::rpc::kInvalidParams, "give one of cmd (argv) and shell");
    json body = json::object();
    for (const char* k : {"cmd", "shell", "cwd", "env"})
        if (a.contains(k)) body[k] = a[k];
    if (a.contains("timeout")) body["timeout_s"] = a["timeout"];
    ExecOptions options;
    try {
        options = parseExec(mcp::JsonRpc::dump(body));
    } catch (const Error& e) {
        throw RpcError(mcp::rpc::kInvalidParams, e.what());
    }
    options.caller = callerName(call.principal);
    if (!services_.sandboxes.ownerOf(id)) return runElsewhere(id, body, call);
    std::string tenant = tenantOf(call, id);
    services_.sandboxes.get(tenant, id);  // another tenant's is not found
    AwaitedResult<ExecOutput> outcome;
    auto pending = services_.commands.submitAsync(tenant, id, options, outcome.callback(), call.cancel);
    if (pending) {
        McpToolResult r;
        r.structured = {{"state", "pending_approval"},
                        {"approval_id", pending->approvalId},
                        {"exec_id", pending->id},
                        {"class", pending->commandClass},
                        {"reason", pending->reason}};
        return r;
    }
    auto started = std::chrono::steady_clock::now();
    while (!outcome.waitFor(std::chrono::seconds(1))) {
        if (!call.progress) continue;
        auto s = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started).count();
        call.progress(static_cast<double>(s), "running for " + std::to_string(s) + " s");
    }
    McpToolResult r;
    r.structured = execOutputJson(outcome.get());
    return r;
}

McpToolResult McpTools::runElsewhere(const std::string& id, const json& body, McpCall& call) {
    // Not on this node (a fleet's other node, or nowhere): the REST exec,
    // which the route table forwards to the sandbox's node. A cancel cannot
    // reach the command there: it runs to its end (or its timeout).
    auto started = std::chrono::steady_clock::now();
    auto answer = std::async(std::launch::async, [this, &call, id, body] {
        return rest(call, "POST", "/v1/sandboxes/" + id + "/exec", body,
                    std::chrono::seconds(body.value("timeout_s", 60) + 60));
    });
    while (answer.wait_for(std::chrono::seconds(1)) != std::future_status::ready) {
        if (call.cancelled->load()) continue;  // no progress after a cancel
        auto s = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started).count();
        if (call.progress) call.progress(static_cast<double>(s), "running for " + std::to_string(s) + " s");
    }
    auto a = answer.get();
    if (a.status == 202 && a.body.is_object()) {
        McpToolResult r;
        r.structured = {{"state", "pending_approval"}};
        for (const char* k : {"approval_id", "exec_id", "class", "reason"})
            if (a.body.contains(k)) r.structured[k] = a.body[k];
        return r;
    }
    return fromAnswer(a, nullptr);
}

McpToolResult McpTools::waitForApproval(const json& a, McpCall& call) {
    std::string approvalId = a["approval_id"].get<std::string>();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(a.value("timeout", 600));
    auto started = std::chrono::steady_clock::now();
    std::string tenant = call.principal.tenant;
    for (int tick = 1;; ++tick) {
        GatedExec g = services_.gates.approval(tenant, approvalId);
        if (g.state == "exited") {
            McpToolResult r;
            r.structured = {{"exit_code", g.exitCode},
                            {"stdout", g.stdoutData},
                            {"stderr", g.stderrData},
                            {"state", "exited"},
                            {"approval_id", approvalId}};
            return r;
        }
        if (g.state != "pending_approval" && g.state != "approved" && g.state != "running")
            return toolError(g.state, "the command was " + g.state +
                                          (g.decisionReason.empty() ? "" : ": " + g.decisionReason) +
                                          (g.error.empty() ? "" : " (" + g.error + ")"));
        if (call.cancelled->load()) throw Error(ErrorCode::conflict, "the wait was cancelled");
        if (std::chrono::steady_clock::now() > deadline)
            return toolError("timeout", "approval " + approvalId + " is still " + g.state +
                                            " after the wait; call wait_for_approval again");
        if (call.progress && tick % 2 == 0) {
            auto s = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started).count();
            call.progress(static_cast<double>(tick), g.state == "pending_approval"
                                                       ? "waiting for a human's decision (" + std::to_string(s) + " s)"
                                                       : "approved; the command runs");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
}

// ------------------------------------------------------------------ files

void McpTools::addFileTools() {
    add({"read_file", "Read a file", "A file's content as UTF-8 text (at most 4 MiB).",
         object({{"sandbox_id", kSandboxId}, {"path", str()}}, {"sandbox_id", "path"}),
         output({{"path", {{"type", "string"}}}, {"content", {{"type", "string"}}}, {"size", {{"type", "integer"}}}}),
         hints(true, false, true, false), kDrive,
         [this](const json& a, McpCall& call) {
             std::string path = a["path"].get<std::string>();
             auto answer = rest(call, "GET", "/v1/sandboxes/" + idArg(a) + "/files?path=" + urlEncode(path));
             if (answer.status != 200) return fromAnswer(answer, nullptr);
             if (answer.raw.size() > (4u << 20)) return toolError("payload_too_large", path + " is larger than 4 MiB");
             McpToolResult r;
             r.structured = {{"path", path}, {"content", answer.raw}, {"size", answer.raw.size()}};
             return r;
         }});
    add({"write_file", "Write a file", "Writes UTF-8 text to a file (made with its directories).",
         object({{"sandbox_id", kSandboxId}, {"path", str()}, {"content", {{"type", "string"}, {"maxLength", 4u << 20}}}},
                {"sandbox_id", "path", "content"}),
         output({{"path", {{"type", "string"}}}, {"size", {{"type", "integer"}}}}),
         hints(false, true, true, false), kDrive,
         [this](const json& a, McpCall& call) {
             std::string path = a["path"].get<std::string>();
             return fromAnswer(rest(call, "PUT", "/v1/sandboxes/" + idArg(a) + "/files?path=" + urlEncode(path),
                                    json(a["content"].get<std::string>()), std::chrono::seconds(120),
                                    "application/octet-stream"),
                               [path](const json& b) {
                                   json j = b.is_object() ? b : json::object();
                                   j["path"] = path;
                                   return j;
                               });
         }});
    add({"list_files", "List a directory", "A directory's entries (name, type, size).",
         object({{"sandbox_id", kSandboxId}, {"path", str()}}, {"sandbox_id", "path"}),
         output({{"entries", {{"type", "array"}, {"items", {{"type", "object"}}}}}}),
         hints(true, false, true, false), kDrive,
         [this](const json& a, McpCall& call) {
             return fromAnswer(rest(call, "GET", "/v1/sandboxes/" + idArg(a) + "/fs?path=" +
                                                     urlEncode(a["path"].get<std::string>())),
                               nullptr);
         }});
}

// ------------------------------------------------------------------ workspaces

void McpTools::addWorkspaceTools() {
    add({"workspace_diff", "Workspace diff",
         "The repository workspace's changes against its base, computed on the host from the "
         "files (a unified patch and the files changed).",
         object({{"sandbox_id", kSandboxId}}, {"sandbox_id"}),
         output({{"patch", {{"type", "string"}}}, {"files", {{"type", "array"}, {"items", {{"type", "object"}}}}}}),
         hints(true, false, true, false), kAny,
         [this](const json& a, McpCall& call) {
             return fromAnswer(rest(call, "GET", "/v1/sandboxes/" + idArg(a) + "/workspace/diff?format=json"),
                               nullptr);
         }});
    add({"workspace_commit", "Commit the workspace",
         "Commits the working tree on the task branch (on the host; nothing is pushed).",
         object({{"sandbox_id", kSandboxId}, {"message", str(65536)}, {"author_name", str(256)},
                 {"author_email", str(256)}},
                {"sandbox_id", "message"}),
         output({{"commit", {{"type", "string"}}}, {"parent", {{"type", "string"}}}, {"branch", {{"type", "string"}}}}),
         hints(false, false, false, false), kDrive,
         [this](const json& a, McpCall& call) {
             json body{{"message", a["message"]}};
             if (a.contains("author_name") || a.contains("author_email"))
                 body["author"] = {{"name", a.value("author_name", "agent")},
                                   {"email", a.value("author_email", "agent@airlock.invalid")}};
             return fromAnswer(rest(call, "POST", "/v1/sandboxes/" + idArg(a) + "/workspace/commit", body),
                               nullptr);
         }});
    add({"request_push", "Request a push",
         "Asks to push a commit of the task branch: a publish approval a human decides.",
         object({{"sandbox_id", kSandboxId}, {"commit", str(64)}}, {"sandbox_id", "commit"}),
         output({{"id", {{"type", "string"}}}, {"state", {{"type", "string"}}}, {"approval_id", {{"type", "string"}}}}),
         hints(false, false, false, true), kDrive,
         [this](const json& a, McpCall& call) {
             return fromAnswer(rest(call, "POST", "/v1/sandboxes/" + idArg(a) + "/workspace/push",
                                    json{{"commit", a["commit"]}}),
                               nullptr);
         }});
}

// ------------------------------------------------------------------ approvals

void McpTools::addApprovalTools() {
    add({"list_approvals", "List pending approvals",
         "Commands and pushes waiting for a human: what, where, why, until when.",
         object({}), output({{"approvals", {{"type", "array"}, {"items", {{"type", "object"}}}}}}),
         hints(true, false, true, false), kDecide,
         [this](const json&, McpCall& call) {
             return fromAnswer(rest(call, "GET", "/v1/approvals"), nullptr);
         }});
    add({"decide_approval", "Decide an approval",
         "Approves or denies a held command or push, with a reason (recorded with the deciding key).",
         object({{"approval_id", str(64)},
                 {"decision", {{"type", "string"}, {"enum", {"approve", "deny"}}}},
                 {"reason", str(4096)}},
                {"approval_id", "decision"}),
         output({{"id", {{"type", "string"}}}, {"state", {{"type", "string"}}}}),
         hints(false, true, false, false), kDecide,
         [this](const json& a, McpCall& call) {
             return fromAnswer(rest(call, "POST", "/v1/approvals/" + idArg(a, "approval_id"),
                                    json{{"decision", a["decision"]}, {"reason", a.value("reason", "decided over MCP")}}),
                               nullptr);
         }});
}

// ------------------------------------------------------------------ resources

json McpTools::resources(McpCall& call) {
    auto a = rest(call, "GET", "/v1/sandboxes");
    json out = json::array();
    if (a.status != 200 || !a.body.is_object()) return out;
    for (const auto& s : a.body.value("sandboxes", json::array())) {
        std::string id = s.value("id", "");
        if (id.empty() || out.size() >= 3 * 500) continue;
        out.push_back({{"uri", "airlock://sandboxes/" + id + "/audit"},
                       {"name", id + " audit log"},
                       {"description", "what the sandbox did, as its audit records it"},
                       {"mimeType", "application/json"}});
        out.push_back({{"uri", "airlock://sandboxes/" + id + "/workspace/diff"},
                       {"name", id + " workspace diff"},
                       {"mimeType", "text/x-diff"}});
        out.push_back({{"uri", "airlock://sandboxes/" + id + "/evidence/latest"},
                       {"name", id + " latest evidence"},
                       {"mimeType", "application/json"}});
    }
    return out;
}

json McpTools::resourceTemplates() const {
    return json::array(
        {{{"uriTemplate", "airlock://sandboxes/{sandbox_id}/audit"},
          {"name", "audit log"},
          {"description", "a sandbox's audit log"},
          {"mimeType", "application/json"}},
         {{"uriTemplate", "airlock://sandboxes/{sandbox_id}/workspace/diff"},
          {"name", "workspace diff"},
          {"mimeType", "text/x-diff"}},
         {{"uriTemplate", "airlock://sandboxes/{sandbox_id}/evidence/latest"},
          {"name", "latest evidence"},
          {"mimeType", "application/json"}}});
}

json McpTools::readResource(const std::string& uri, McpCall& call) {
    const std::string prefix = "airlock://sandboxes/";
    auto notFound = [&] {
        return RpcError(mcp::rpc::kResourceNotFound, "resource not found", json{{"uri", uri}});
    };
    if (uri.rfind(prefix, 0) != 0 || uri.size() > 256) throw notFound();
    std::string rest_ = uri.substr(prefix.size());
    auto slash = rest_.find('/');
    if (slash == std::string::npos) throw notFound();
    std::string id = rest_.substr(0, slash), what = rest_.substr(slash + 1);
    if (id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos) throw notFound();
    Answer a;
    std::string mime = "application/json";
    if (what == "audit") {
        a = rest(call, "GET", "/v1/sandboxes/" + id + "/audit?limit=1000");
    } else if (what == "workspace/diff") {
        a = rest(call, "GET", "/v1/sandboxes/" + id + "/workspace/diff");
        mime = "text/x-diff";
    } else if (what == "evidence/latest") {
        a = rest(call, "GET", "/v1/sandboxes/" + id + "/evidence");
        if (a.status == 200 && a.body.is_object()) {
            auto list = a.body.value("evidence", json::array());
            a.raw = mcp::JsonRpc::dump(list.empty() ? json::object() : list.back());
        }
    } else {
        throw notFound();
    }
    if (a.status == 404) throw notFound();
    if (a.status != 200)
        throw RpcError(mcp::rpc::kInternalError, "reading " + uri + " answered " + std::to_string(a.status));
    return json{{"contents", json::array({{{"uri", uri}, {"mimeType", mime}, {"text", a.raw}}})}};
}

}  // namespace airlock::api

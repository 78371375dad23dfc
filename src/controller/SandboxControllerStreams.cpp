// SandboxController: the operations that run through agent streams (streamed
// exec, files, background processes, preview tunnels).
#include <nlohmann/json.hpp>

#include "controller/SandboxController.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"

namespace airlock {
namespace {
using nlohmann::json;
constexpr auto kOpTimeout = std::chrono::seconds(30);

json execJson(const protocol::ExecRequest& r) { return json::parse(protocol::toJson(r)); }

void requireAbsolute(const std::string& path) {
    if (path.empty() || path[0] != '/') throw Error(ErrorCode::bad_request, "path must be absolute, got '" + path + "'");
    if (path.size() > 4096 || path.find('\0') != std::string::npos) throw Error(ErrorCode::bad_request, "bad path");
}
}  // namespace

std::shared_ptr<AgentStream> SandboxController::openExec(const std::string& tenant, const std::string& id,
                                                         const ExecOptions& options, const TerminalOptions& terminal,
                                                         AgentStream::Handler handler) {
    auto agent = runningAgent(tenant, id);
    auto record = requireOwned(tenant, id);
    requireAllowed(record, options, "exec/ws");
    auto request = toAgentRequest(options, baseEnv(record));
    request.tty = terminal.tty;
    request.rows = terminal.rows;
    request.cols = terminal.cols;
    request.stdin_stream = terminal.stdinStream;
    return agent->open(execJson(request), std::move(handler));
}

std::shared_ptr<AgentStream> SandboxController::openUpload(const std::string& tenant, const std::string& id,
                                                           const std::string& path, std::optional<unsigned> mode) {
    requireAbsolute(path);
    json request{{"op", "file_write"}, {"path", path}};
    if (mode) request["mode"] = *mode;
    return runningAgent(tenant, id)->open(request);
}

std::shared_ptr<AgentStream> SandboxController::openDownload(const std::string& tenant, const std::string& id,
                                                             const std::string& path, AgentStream::Handler handler) {
    requireAbsolute(path);
    return runningAgent(tenant, id)->open({{"op", "file_read"}, {"path", path}}, std::move(handler));
}

json SandboxController::fileOp(const std::string& tenant, const std::string& id, const json& request) {
    requireAbsolute(request.value("path", std::string()));
    json r = request;
    r["op"] = "fs";
    return runningAgent(tenant, id)->call(r, kOpTimeout);
}

json SandboxController::processOp(const std::string& tenant, const std::string& id, const json& request) {
    auto agent = runningAgent(tenant, id);
    json r = request;
    if (r.value("op", "") == "process_start") {
        // Background processes use the same defaults as exec (user, env).
        ExecOptions o;
        for (const auto& a : r.at("argv")) o.argv.push_back(a.get<std::string>());
        o.cwd = r.value("cwd", "");
        o.user = r.value("user", "");
        if (r.contains("env")) o.env = r["env"].get<std::map<std::string, std::string>>();
        auto record = requireOwned(tenant, id);
        requireAllowed(record, o, "processes");
        auto exec = toAgentRequest(o, baseEnv(record));
        exec.background = true;
        exec.timeout_ms = 0;
        exec.stdin_stream = r.value("stdin_open", false);
        r = execJson(exec);
    }
    return agent->call(r, kOpTimeout);
}

std::shared_ptr<AgentStream> SandboxController::openProcessLogs(const std::string& tenant, const std::string& id,
                                                                const std::string& processId, bool follow,
                                                                AgentStream::Handler handler) {
    return runningAgent(tenant, id)->open({{"op", "process_logs"}, {"id", processId}, {"follow", follow}},
                                          std::move(handler));
}

ExposedPort SandboxController::exposePort(const std::string& tenant, const std::string& id, unsigned port) {
    if (port < 1 || port > 65535) throw Error(ErrorCode::bad_request, "port must be 1-65535");
    requireOwned(tenant, id);
    if (auto existing = ports_.find(id, port)) return *existing;
    ExposedPort p{id, port, newSecretToken(), nowTimestamp()};
    ports_.upsert(p);
    return p;
}

std::vector<ExposedPort> SandboxController::listPorts(const std::string& tenant, const std::string& id) {
    requireOwned(tenant, id);
    return ports_.list(id);
}

void SandboxController::closePort(const std::string& tenant, const std::string& id, unsigned port) {
    requireOwned(tenant, id);
    if (!ports_.find(id, port)) throw Error(ErrorCode::not_found, "port " + std::to_string(port) + " is not exposed");
    ports_.remove(id, port);
}

std::shared_ptr<AgentStream> SandboxController::openPreviewTunnel(const std::string& sandboxId, unsigned port,
                                                                  const std::string& token, AgentStream::Handler handler) {
    auto exposed = isValidId(sandboxId, "sbx-") ? ports_.find(sandboxId, port) : std::nullopt;
    // Wrong sandbox, port not exposed and wrong token all look the same.
    bool tokenOk = exposed && exposed->token.size() == token.size();
    if (tokenOk) {
        unsigned char diff = 0;
        for (std::size_t i = 0; i < token.size(); ++i) diff |= static_cast<unsigned char>(exposed->token[i] ^ token[i]);
        tokenOk = diff == 0;
    }
    if (!tokenOk) throw Error(ErrorCode::not_found, "no such preview");
    auto r = store_.find(sandboxId);
    if (!r || r->state != SandboxState::running) throw Error(ErrorCode::conflict, "the sandbox is not running");
    return agentFor(sandboxId)->open({{"op", "tunnel"}, {"port", port}}, std::move(handler));
}

}  // namespace airlock

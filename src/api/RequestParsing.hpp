#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "agentclient/AgentConnection.hpp"
#include "controller/CreateSandboxRequest.hpp"
#include "controller/ExecOptions.hpp"
#include "controller/SandboxCommands.hpp"
#include "controller/SandboxSecrets.hpp"
#include "controller/Sandboxes.hpp"
#include "policy/CommandPolicy.hpp"
#include "store/ApiKeyStore.hpp"
#include "store/AuditStore.hpp"
#include "store/GatedExecStore.hpp"
#include "store/SandboxStore.hpp"
#include "store/SnapshotStore.hpp"
#include "store/TenantStore.hpp"

namespace airlock::api {

// Turns request bodies into controller commands. Unknown fields, wrong types
// and out-of-range values throw Error(bad_request) with a readable message.
CreateSandboxRequest parseCreateSandbox(const std::string& body);
// A template build's sandbox settings ({policy, packages, network}, as a
// create takes them) into the build sandbox's request.
void applyBuildSandboxSettings(const nlohmann::json& settings, CreateSandboxRequest& into);
ExecOptions parseExec(const std::string& body);
// The first message of a WebSocket exec: exec fields plus tty, rows, cols.
ExecOptions parseExecStart(const std::string& body, TerminalOptions& terminal);
// POST .../processes: {"cmd":[...]} or {"shell":...}, cwd, env, user, stdin_open.
// POST /v1/sandboxes/{id}/processes: the command, and whether its stdin stays open.
struct ProcessStart {
    ExecOptions options;
    bool stdinOpen = false;
};
ProcessStart parseProcessStart(const std::string& body);

// {"deny":[...],"approve":[...],"allow":[...]} command-prefix globs.
policy::PolicyRules parsePolicyRules(const nlohmann::json& j);
// {"allow":[...]}: the egress allowlist (entries validated).
std::vector<std::string> parseNetwork(const nlohmann::json& j);
std::vector<std::string> parseNetworkUpdate(const std::string& body);
// {"NAME":"value"} or {"NAME":{"value":"...","commands":["git *"]}}.
std::map<std::string, SecretSpec> parseSecrets(const nlohmann::json& j);
struct ApprovalDecision {
    bool approve = false;
    std::string reason;
    std::string requestDigest;  // optional: the digest the approver read
};
// POST /v1/approvals/{id}: {"decision":"approve"|"deny","reason":"...",
// "request_digest":"<hex>" (optional: decided only if it is the request's)}.
ApprovalDecision parseApprovalDecision(const std::string& body);
// POST .../timeout: {"timeout_s": N}.
std::int64_t parseTimeoutUpdate(const std::string& body);
// Action routes (pause, resume, snapshots) take no fields: empty or {}.
void parseEmptyBody(const std::string& body, const char* what);
// {"memory": false}: a pause without memory; empty or true: with it.
PauseKind parsePause(const std::string& body);

// POST /v1/keys: {"tenant","role","name","expires_at"?}.
struct KeyRequest {
    std::string tenant, name;
    Role role = Role::agent;
    std::int64_t expiresAt = 0;  // unix seconds; 0: never
};
KeyRequest parseKeyRequest(const std::string& body, std::int64_t now);
// Tenant names: 1-63 of [a-z0-9._-], starting with a letter or digit.
bool isValidTenantName(const std::string& name);
nlohmann::json keyJson(const ApiKeyRecord& k);
// PUT /v1/tenants/{name}: {"quota":{...},"policy":{...},"network":{"allow":[...]}}.
TenantRecord parseTenantUpdate(const std::string& name, const std::string& body);
nlohmann::json tenantJson(const TenantRecord& t, const TenantUsage& usage);

nlohmann::json sandboxJson(const SandboxRecord& r);
// What another node's list says of a sandbox, read back as far as a list
// shows it (id, template, state, size, times, metadata); nullopt when the
// item is no sandbox (a node that does not answer lists "unavailable" ones).
std::optional<SandboxRecord> listedSandboxRecord(const nlohmann::json& j);
nlohmann::json snapshotJson(const SnapshotRecord& s);
nlohmann::json gatedExecJson(const GatedExec& g);
nlohmann::json auditEventJson(const AuditEvent& e);
nlohmann::json execOutputJson(const ExecOutput& out);

}  // namespace airlock::api

#include "api/RequestParsing.hpp"

#include <regex>

#include "api/WorkspaceParsing.hpp"
#include "controller/SandboxVolumes.hpp"
#include "core/AsciiLower.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/SecretMasker.hpp"
#include "egress/SandboxCa.hpp"
#include "egress/SecretHeaders.hpp"
#include "core/JsonFields.hpp"
#include "egress/EgressAllowlist.hpp"
#include "packages/PackageRules.hpp"

namespace airlock::api {
namespace {
using nlohmann::json;

constexpr std::size_t kMaxMapEntries = 128;
constexpr std::size_t kMaxValueBytes = 16 * 1024;

unsigned readUnsigned(const json& j, const char* key, unsigned min, unsigned max) {
    const json& v = j.at(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < min || v.get<std::int64_t>() > max)
        throw Error(ErrorCode::bad_request, std::string("'") + key + "' must be an integer from " +
                                                std::to_string(min) + " to " + std::to_string(max));
    return static_cast<unsigned>(v.get<std::int64_t>());
}

std::string readString(const json& j, const char* key, std::size_t maxBytes = kMaxValueBytes) {
    const json& v = j.at(key);
    if (!v.is_string())
        throw Error(ErrorCode::bad_request, std::string("'") + key + "' must be a string");
    if (v.get_ref<const std::string&>().size() > maxBytes)
        throw Error(ErrorCode::bad_request, std::string("'") + key + "' is too long");
    return v.get<std::string>();
}

std::map<std::string, std::string> readStringMap(const json& j, const char* key, bool envNames) {
    const json& v = j.at(key);
    if (!v.is_object())
        throw Error(ErrorCode::bad_request,
                    std::string("'") + key + "' must be an object of strings");
    if (v.size() > kMaxMapEntries)
        throw Error(ErrorCode::bad_request, std::string("'") + key + "' has too many entries");
    static const std::regex envName("[A-Za-z_][A-Za-z0-9_]*");
    std::map<std::string, std::string> out;
    for (const auto& [k, val] : v.items()) {
        if (!val.is_string() || val.get_ref<const std::string&>().size() > kMaxValueBytes)
            throw Error(ErrorCode::bad_request,
                        std::string("'") + key + "." + k + "' must be a string (at most 16 KiB)");
        if (k.empty() || k.size() > 256 || (envNames && !std::regex_match(k, envName)))
            throw Error(ErrorCode::bad_request,
                        std::string("'") + key + "' has an invalid name '" + k + "'");
        out[k] = val.get<std::string>();
    }
    return out;
}

// A list of workspace-relative globs (artifacts, sensitive paths): no
// leading "/", no ".." segment, bounded.
std::vector<std::string> readGlobList(const json& j, const char* key, const std::string& name,
                                      std::size_t maxEntries) {
    const json& v = j.at(key);
    if (!v.is_array() || v.size() > maxEntries)
        throw Error(ErrorCode::bad_request, "'" + name + "' must be a list of at most " +
                                                std::to_string(maxEntries) + " globs");
    std::vector<std::string> out;
    for (const auto& e : v) {
        if (!e.is_string() || e.get_ref<const std::string&>().empty() ||
            e.get_ref<const std::string&>().size() > 1024)
            throw Error(ErrorCode::bad_request,
                        "'" + name + "' entries must be non-empty strings (at most 1 KiB)");
        const std::string& g = e.get_ref<const std::string&>();
        std::string padded = "/" + g + "/";
        if (g[0] == '/' || padded.find("/../") != std::string::npos ||
            g.find('\0') != std::string::npos)
            throw Error(
                ErrorCode::bad_request,
                "'" + name + "' entries are workspace-relative (no leading '/', no '..'): " + g);
        out.push_back(g);
    }
    return out;
}

std::vector<std::string> readStringList(const json& j, const char* key, const std::string& name,
                                        std::size_t maxEntries, std::size_t maxBytes) {
    const json& v = j.at(key);
    if (!v.is_array() || v.size() > maxEntries)
        throw Error(ErrorCode::bad_request, "'" + name + "' must be a list of at most " +
                                                std::to_string(maxEntries) + " strings");
    std::vector<std::string> out;
    for (const auto& e : v) {
        if (!e.is_string() || e.get_ref<const std::string&>().empty() ||
            e.get_ref<const std::string&>().size() > maxBytes)
            throw Error(ErrorCode::bad_request,
                        "'" + name + "' entries must be non-empty strings of at most " +
                            std::to_string(maxBytes) + " bytes");
        out.push_back(e.get<std::string>());
    }
    return out;
}

// "task": what the sandbox is for, kept with its evidence.
TaskSpec parseTask(const json& j) {
    if (!j.is_object()) throw Error(ErrorCode::bad_request, "'task' must be an object");
    rejectUnknownFields(j, {"id", "prompt", "requested_by", "test_commands", "sensitive_paths"},
                        "task");
    TaskSpec out;
    if (j.contains("id")) {
        std::string id = readString(j, "id", 128);
        static const std::regex idChars("[A-Za-z0-9._:/-]+");
        if (!std::regex_match(id, idChars))
            throw Error(ErrorCode::bad_request,
                        "'task.id' may hold letters, digits and . _ : / - only");
        out.id = id;
    }
    if (j.contains("prompt")) out.prompt = readString(j, "prompt", 64 * 1024);
    if (j.contains("requested_by")) out.requestedBy = readString(j, "requested_by", 256);
    if (j.contains("test_commands"))
        out.testCommands = readStringList(j, "test_commands", "task.test_commands", 32, 4096);
    if (j.contains("sensitive_paths"))
        out.sensitivePaths = readGlobList(j, "sensitive_paths", "task.sensitive_paths", 64);
    return out;
}
}  // namespace

IdleRule parseIdleRule(const json& j) {
    if (!j.is_object()) throw Error(ErrorCode::bad_request, "'idle' must be an object");
    rejectUnknownFields(j, {"after_s", "action"}, "idle rule");
    IdleRule rule;
    if (j.contains("after_s")) rule.afterS = readUnsigned(j, "after_s", 1, 7 * 24 * 3600);
    if (j.contains("action")) rule.action = idleActionFrom(readString(j, "action", 16));
    return rule;
}

CreateSandboxRequest parseCreateSandbox(const std::string& body) {
    json j = parseJsonBody(body);
    rejectUnknownFields(j,
                        {"template", "snapshot", "boot", "vcpus", "memory_mib", "disk_gib",
                         "timeout_s", "on_timeout", "metadata", "env", "policy", "secrets",
                         "network", "workspace", "packages", "task", "artifacts", "auto_resume",
                         "volumes", "idle"},
                        "sandbox request");
    CreateSandboxRequest r;
    if (j.contains("template") && j.contains("snapshot"))
        throw Error(ErrorCode::bad_request, "give 'template' or 'snapshot', not both");
    if (j.contains("template")) r.templateName = readString(j, "template", 128);
    if (r.templateName.empty()) throw Error(ErrorCode::bad_request, "'template' must not be empty");
    if (j.contains("snapshot")) {
        r.snapshot = readString(j, "snapshot", 128);
        if (r.snapshot.empty()) throw Error(ErrorCode::bad_request, "'snapshot' must not be empty");
    }
    if (j.contains("boot")) r.boot = bootModeFrom(readString(j, "boot", 16));
    if (j.contains("vcpus")) r.vcpus = readUnsigned(j, "vcpus", 1, 64);
    if (j.contains("memory_mib")) r.memoryMib = readUnsigned(j, "memory_mib", 1, 1 << 20);
    if (j.contains("disk_gib")) r.diskGib = readUnsigned(j, "disk_gib", 1, 1 << 20);
    if (j.contains("timeout_s")) r.timeoutS = readUnsigned(j, "timeout_s", 0, 7 * 24 * 3600);
    if (j.contains("on_timeout")) r.onTimeout = timeoutActionFrom(readString(j, "on_timeout", 16));
    if (auto it = j.find("auto_resume"); it != j.end()) {
        if (!it->is_boolean()) throw Error(ErrorCode::bad_request, "'auto_resume' must be a boolean");
        r.autoResume = it->get<bool>();
    }
    if (auto it = j.find("volumes"); it != j.end() && !it->is_null()) {
        if (!it->is_array()) throw Error(ErrorCode::bad_request, "'volumes' must be an array");
        if (it->size() > SandboxVolumes::kMaxPerSandbox)
            throw Error(ErrorCode::bad_request, "a sandbox mounts at most " +
                                                    std::to_string(SandboxVolumes::kMaxPerSandbox) +
                                                    " volumes");
        std::vector<VolumeRequest> volumes;
        for (const auto& v : *it) {
            if (!v.is_object())
                throw Error(ErrorCode::bad_request, "each of 'volumes' is an object");
            rejectUnknownFields(v, {"name", "path", "read_only"}, "volume mount");
            VolumeRequest q;
            if (v.contains("name")) q.name = readString(v, "name", 64);
            if (v.contains("path")) q.path = readString(v, "path", 512);
            if (q.name.empty() || q.path.empty())
                throw Error(ErrorCode::bad_request, "a volume mount needs 'name' and 'path'");
            if (auto ro = v.find("read_only"); ro != v.end() && !ro->is_null()) {
                if (!ro->is_boolean())
                    throw Error(ErrorCode::bad_request, "'read_only' must be a boolean");
                q.readOnly = ro->get<bool>();
            }
            volumes.push_back(std::move(q));
        }
        r.volumes = std::move(volumes);
    }
    if (auto it = j.find("idle"); it != j.end() && !it->is_null()) r.idle = parseIdleRule(*it);
    if (j.contains("metadata")) r.metadata = readStringMap(j, "metadata", false);
    if (j.contains("env")) r.env = readStringMap(j, "env", true);
    if (j.contains("policy")) r.policy = parsePolicyRules(j["policy"]);
    if (j.contains("secrets")) r.secrets = parseSecrets(j["secrets"]);
    if (j.contains("network")) r.networkAllow = parseNetwork(j["network"]);
    if (j.contains("workspace")) r.workspace = parseWorkspaceSpec(j["workspace"]);
    // Applied over the tenant's rules at create; a bad field is a 400 now.
    if (j.contains("packages")) r.packages = packages::PackageRulesChange::parse(j["packages"]);
    if (j.contains("task")) r.task = parseTask(j["task"]);
    if (j.contains("artifacts")) r.artifacts = readGlobList(j, "artifacts", "artifacts", 64);
    return r;
}

void applyBuildSandboxSettings(const nlohmann::json& settings, CreateSandboxRequest& into) {
    json create = json::object();
    for (const char* k : {"policy", "packages", "network"})
        if (settings.contains(k)) create[k] = settings[k];
    auto parsed = parseCreateSandbox(create.dump());
    into.policy = parsed.policy;
    into.packages = parsed.packages;
    into.networkAllow = parsed.networkAllow;
}

std::vector<std::string> parseNetwork(const nlohmann::json& j) {
    if (!j.is_object())
        throw Error(ErrorCode::bad_request,
                    "'network' must be an object like {\"allow\":[\"host\",...]}");
    rejectUnknownFields(j, {"allow"}, "network");
    auto it = j.find("allow");
    if (it == j.end())
        throw Error(ErrorCode::bad_request,
                    "'network.allow' is required (an empty list: no network)");
    if (!it->is_array())
        throw Error(ErrorCode::bad_request, "'network.allow' must be a list of host names");
    std::vector<std::string> out;
    for (const auto& e : *it) {
        if (!e.is_string())
            throw Error(ErrorCode::bad_request, "'network.allow' entries must be strings");
        out.push_back(e.get<std::string>());
    }
    egress::EgressAllowlist::parse(out);  // a bad entry is a 400 naming it
    return out;
}

std::vector<std::string> parseNetworkUpdate(const std::string& body) {
    return parseNetwork(parseJsonBody(body));
}

SecretInjection parseSecretInjection(const nlohmann::json& j, const std::string& name) {
    const std::string where = "secret " + name + ": 'inject'";
    if (!j.is_object())
        throw Error(ErrorCode::bad_request,
                    where + " must be {\"hosts\": [...], \"header\"?, \"format\"?}");
    rejectUnknownFields(j, {"hosts", "header", "format"}, where);
    SecretInjection inject;
    if (!j.contains("hosts") || !j["hosts"].is_array() || j["hosts"].empty() ||
        j["hosts"].size() > 20)
        throw Error(ErrorCode::bad_request, where + ".hosts must list 1 to 20 hosts");
    for (const auto& h : j["hosts"]) {
        std::string host = h.is_string() ? h.get<std::string>() : "";
        auto pattern = egress::HostPattern::parse(host);
        std::string name =
            pattern.host.rfind("*.", 0) == 0 ? pattern.host.substr(2) : pattern.host;
        if (host.size() > 260 || egress::SandboxCa::canonicalHost(name).empty())
            throw Error(ErrorCode::bad_request,
                        where + ".hosts: '" + host.substr(0, 100) +
                            "' is not a host as the allowlist writes one (name, *.name or "
                            "address, optionally :port)");
        inject.hosts.push_back(host);
    }
    if (j.contains("header")) {
        if (!j["header"].is_string())
            throw Error(ErrorCode::bad_request, where + ".header must be a header name");
        inject.header = j["header"].get<std::string>();
        std::string lower = asciiLower(inject.header);
        bool token = !inject.header.empty() && inject.header.size() <= 64 &&
                     inject.header.find_first_not_of(
                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~") ==
                         std::string::npos;
        // What frames the request or routes it is never the secret's.
        for (const char* framing : {"host", "content-length", "transfer-encoding", "connection",
                                    "upgrade", "te", "trailer", "keep-alive", "expect"})
            if (lower == framing) token = false;
        if (!token || lower.rfind("proxy-", 0) == 0)
            throw Error(ErrorCode::bad_request,
                        where + ".header: '" + inject.header.substr(0, 64) +
                            "' is not a header a secret may set");
    }
    if (j.contains("format")) {
        if (!j["format"].is_string() || inject.header.empty())
            throw Error(ErrorCode::bad_request,
                        where + ".format is a string, and goes with a header");
        inject.format = j["format"].get<std::string>();
        if (inject.format.size() > 1024 || inject.format.find("{value}") == std::string::npos ||
            inject.format.find_first_of(std::string("\r\n\0", 3)) != std::string::npos)
            throw Error(ErrorCode::bad_request,
                        where + ".format must hold {value} on one line (1 KiB at most)");
    }
    return inject;
}

std::map<std::string, SecretSpec> parseSecrets(const nlohmann::json& j) {
    // Messages name the secret, never its value.
    if (!j.is_object() || j.size() > 64)
        throw Error(ErrorCode::bad_request, "'secrets' must be an object of at most 64 secrets");
    static const std::regex envName("[A-Za-z_][A-Za-z0-9_]*");
    std::map<std::string, SecretSpec> out;
    for (const auto& [name, v] : j.items()) {
        if (name.size() > 256 || !std::regex_match(name, envName))
            throw Error(ErrorCode::bad_request, "'secrets' has an invalid name '" + name + "'");
        SecretSpec spec;
        if (v.is_string()) {
            spec.value = v.get<std::string>();
        } else if (v.is_object()) {
            rejectUnknownFields(v, {"value", "commands", "inject"}, "secret " + name);
            if (v.contains("inject")) spec.inject = parseSecretInjection(v["inject"], name);
            if (!v.contains("value") || !v["value"].is_string())
                throw Error(ErrorCode::bad_request, "secret " + name + " needs a string 'value'");
            spec.value = v["value"].get<std::string>();
            if (v.contains("commands")) {
                if (!v["commands"].is_array() || v["commands"].size() > 50)
                    throw Error(ErrorCode::bad_request,
                                "secret " + name + ": 'commands' must be a list of globs");
                for (const auto& g : v["commands"]) {
                    if (!g.is_string() || g.get_ref<const std::string&>().empty())
                        throw Error(ErrorCode::bad_request,
                                    "secret " + name + ": 'commands' must be a list of globs");
                    spec.commands.push_back(g.get<std::string>());
                }
            }
        } else {
            throw Error(ErrorCode::bad_request, "secret " + name +
                                                    " must be a string or {\"value\",\"commands\","
                                                    "\"inject\"}");
        }
        if (spec.value.size() > 16 * 1024 || spec.value.find('\0') != std::string::npos)
            throw Error(ErrorCode::bad_request,
                        "secret " + name + " is too long or holds a NUL byte");
        if (spec.inject && spec.value.find_first_of("\r\n") != std::string::npos)
            throw Error(ErrorCode::bad_request,
                        "secret " + name + " holds a line break: it cannot go in a request header");
        // Shorter values would match ordinary text: masked they would edit
        // the record, unmasked they would leak.
        if (spec.value.size() < SecretMasker::kMinLength)
            throw Error(ErrorCode::unprocessable,
                        "secret " + name + " is shorter than " +
                            std::to_string(SecretMasker::kMinLength) + " bytes (it could not be masked)");
        out[name] = std::move(spec);
    }
    return out;
}

policy::PolicyRules parsePolicyRules(const nlohmann::json& j) {
    if (!j.is_object())
        throw Error(ErrorCode::bad_request,
                    "'policy' must be an object with deny/approve/allow lists");
    rejectUnknownFields(j, {"deny", "approve", "allow"}, "policy");
    policy::PolicyRules rules;
    auto list = [&](const char* key, std::vector<std::string>& out) {
        auto it = j.find(key);
        if (it == j.end()) return;
        if (!it->is_array() || it->size() > 200)
            throw Error(ErrorCode::bad_request,
                        std::string("'policy.") + key + "' must be a list of at most 200 globs");
        for (const auto& g : *it) {
            if (!g.is_string() || g.get_ref<const std::string&>().empty() ||
                g.get_ref<const std::string&>().size() > 512)
                throw Error(ErrorCode::bad_request,
                            std::string("'policy.") + key +
                                "' entries must be non-empty strings of at most 512 bytes");
            out.push_back(g.get<std::string>());
        }
    };
    list("deny", rules.deny);
    list("approve", rules.approve);
    list("allow", rules.allow);
    return rules;
}

ApprovalDecision parseApprovalDecision(const std::string& body) {
    json j = parseJsonBody(body);
    rejectUnknownFields(j, {"decision", "reason", "request_digest"}, "approval decision");
    ApprovalDecision d;
    std::string decision = j.contains("decision") ? readString(j, "decision", 16) : "";
    if (decision != "approve" && decision != "deny")
        throw Error(ErrorCode::bad_request, "'decision' must be \"approve\" or \"deny\"");
    d.approve = decision == "approve";
    if (j.contains("reason")) d.reason = readString(j, "reason", 2000);
    if (j.contains("request_digest")) d.requestDigest = readString(j, "request_digest", 64);
    return d;
}

std::int64_t parseTimeoutUpdate(const std::string& body) {
    json j = parseJsonBody(body);
    rejectUnknownFields(j, {"timeout_s"}, "timeout request");
    if (!j.contains("timeout_s")) throw Error(ErrorCode::bad_request, "'timeout_s' is required");
    return readUnsigned(j, "timeout_s", 0, 7 * 24 * 3600);
}

void parseEmptyBody(const std::string& body, const char* what) {
    if (body.find_first_not_of(" \t\r\n") == std::string::npos) return;
    json j = parseJsonBody(body);
    rejectUnknownFields(j, {}, what);
}

PauseKind parsePause(const std::string& body) {
    if (body.find_first_not_of(" \t\r\n") == std::string::npos) return PauseKind::memory;
    json j = parseJsonBody(body);
    rejectUnknownFields(j, {"memory", "hibernate"}, "pause request");
    bool hibernate = false;
    if (auto h = j.find("hibernate"); h != j.end() && !h->is_null()) {
        if (!h->is_boolean()) throw Error(ErrorCode::bad_request, "'hibernate' must be a boolean");
        hibernate = h->get<bool>();
    }
    auto it = j.find("memory");
    if (it != j.end() && !it->is_null() && !it->is_boolean())
        throw Error(ErrorCode::bad_request, "'memory' must be a boolean");
    bool memory = it == j.end() || it->is_null() || it->get<bool>();
    if (hibernate && !memory)
        throw Error(ErrorCode::bad_request,
                    "'hibernate' keeps the memory (on disk): it cannot go with 'memory': false");
    if (hibernate) return PauseKind::hibernate;
    return memory ? PauseKind::memory : PauseKind::disk_only;
}

namespace {
ExecOptions parseExecFields(const json& j) {
    ExecOptions o;
    bool hasCmd = j.contains("cmd"), hasShell = j.contains("shell");
    if (hasCmd == hasShell)
        throw Error(ErrorCode::bad_request,
                    "give exactly one of 'cmd' (argv array) or 'shell' (string)");
    if (hasCmd) {
        const json& cmd = j["cmd"];
        if (!cmd.is_array() || cmd.empty())
            throw Error(ErrorCode::bad_request, "'cmd' must be a non-empty array of strings");
        for (const auto& a : cmd) {
            if (!a.is_string())
                throw Error(ErrorCode::bad_request, "'cmd' must be a non-empty array of strings");
            o.argv.push_back(a.get<std::string>());
        }
        if (o.argv.size() > protocol::kMaxArgv)
            throw Error(ErrorCode::bad_request, "'cmd' has too many arguments");
        if (o.argv[0].empty()) throw Error(ErrorCode::bad_request, "'cmd[0]' must not be empty");
    } else {
        o.shell = readString(j, "shell", protocol::kMaxArgBytes);
        if (o.shell->empty()) throw Error(ErrorCode::bad_request, "'shell' must not be empty");
    }
    if (j.contains("cwd")) {
        o.cwd = readString(j, "cwd", 4096);
        if (o.cwd.empty() || o.cwd[0] != '/')
            throw Error(ErrorCode::bad_request, "'cwd' must be an absolute path");
    }
    if (j.contains("env")) o.env = readStringMap(j, "env", true);
    if (j.contains("timeout_s")) o.timeoutS = readUnsigned(j, "timeout_s", 1, kMaxExecTimeoutS);
    if (j.contains("stdin")) o.stdinData = readString(j, "stdin", 8 * 1024 * 1024);
    if (j.contains("user")) {
        o.user = readString(j, "user", 64);
        if (o.user != "user" && o.user != "root")
            throw Error(ErrorCode::bad_request, "'user' must be \"user\" or \"root\"");
    }
    if (j.contains("purpose")) {
        o.purpose = readString(j, "purpose", 16);
        if (o.purpose != "test")
            throw Error(ErrorCode::bad_request,
                        "'purpose' can only be \"test\" (its exit code is a test result)");
    }
    return o;
}
}  // namespace

ExecOptions parseExec(const std::string& body) {
    json j = parseJsonBody(body);
    rejectUnknownFields(j, {"cmd", "shell", "cwd", "env", "timeout_s", "stdin", "user", "purpose"},
                        "exec request");
    return parseExecFields(j);
}

ExecOptions parseExecStart(const std::string& body, TerminalOptions& terminal) {
    json j = parseJsonBody(body);
    rejectUnknownFields(j,
                        {"cmd", "shell", "cwd", "env", "timeout_s", "stdin", "user", "tty", "rows",
                         "cols", "purpose"},
                        "exec start message");
    if (j.contains("tty")) {
        if (!j["tty"].is_boolean()) throw Error(ErrorCode::bad_request, "'tty' must be a boolean");
        terminal.tty = j["tty"].get<bool>();
    }
    if (j.contains("rows")) terminal.rows = readUnsigned(j, "rows", 1, 1000);
    if (j.contains("cols")) terminal.cols = readUnsigned(j, "cols", 1, 1000);
    terminal.stdinStream = true;
    ExecOptions o = parseExecFields(j);
    if (!j.contains("timeout_s")) o.timeoutS = 3600;  // interactive sessions live longer
    return o;
}

ProcessStart parseProcessStart(const std::string& body) {
    json j = parseJsonBody(body);
    rejectUnknownFields(j, {"cmd", "shell", "cwd", "env", "user", "stdin_open"}, "process request");
    ProcessStart start;
    ExecOptions o = parseExecFields(j);
    start.options.argv = o.shell ? std::vector<std::string>{"/bin/sh", "-c", *o.shell} : o.argv;
    start.options.cwd = o.cwd;
    start.options.user = o.user;
    start.options.env = o.env;
    if (j.contains("stdin_open")) {
        if (!j["stdin_open"].is_boolean())
            throw Error(ErrorCode::bad_request, "'stdin_open' must be a boolean");
        start.stdinOpen = j["stdin_open"].get<bool>();
    }
    return start;
}

bool isValidTenantName(const std::string& name) {
    if (name.empty() || name.size() > 63) return false;
    auto lowerOrDigit = [](char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
    };
    if (!lowerOrDigit(name[0])) return false;
    for (char ch : name)
        if (!lowerOrDigit(ch) && ch != '.' && ch != '_' && ch != '-') return false;
    return true;
}

KeyRequest parseKeyRequest(const std::string& body, std::int64_t now) {
    json j = parseJsonBody(body);
    rejectUnknownFields(j, {"tenant", "role", "name", "expires_at"}, "key request");
    KeyRequest r;
    if (!j.contains("tenant")) throw Error(ErrorCode::bad_request, "'tenant' is required");
    r.tenant = readString(j, "tenant", 63);
    if (!isValidTenantName(r.tenant))
        throw Error(
            ErrorCode::bad_request,
            "'tenant' must be 1-63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit");
    if (!j.contains("role"))
        throw Error(ErrorCode::bad_request, "'role' is required (agent, approver or admin)");
    auto role = parseRole(readString(j, "role", 16));
    if (!role) throw Error(ErrorCode::bad_request, "'role' must be agent, approver or admin");
    r.role = *role;
    r.name = j.contains("name") ? readString(j, "name", 64) : std::string();
    if (r.name.empty()) throw Error(ErrorCode::bad_request, "'name' is required (1-64 bytes)");
    for (unsigned char ch : r.name)
        if (ch < 0x20 || ch == 0x7f)
            throw Error(ErrorCode::bad_request, "'name' must be printable");
    if (j.contains("expires_at") && !j["expires_at"].is_null()) {
        auto at = parseTimestamp(readString(j, "expires_at", 40));
        if (!at) throw Error(ErrorCode::bad_request, "'expires_at' must be an RFC 3339 time");
        if (*at <= now) throw Error(ErrorCode::bad_request, "'expires_at' is in the past");
        r.expiresAt = *at;
    }
    return r;
}

TenantRecord parseTenantUpdate(const std::string& name, const std::string& body) {
    if (!isValidTenantName(name))
        throw Error(ErrorCode::bad_request, "bad tenant name '" + name + "'");
    json j = parseJsonBody(body);
    rejectUnknownFields(j, {"quota", "policy", "network", "packages", "idle"}, "tenant");
    TenantRecord t;
    t.name = name;
    if (j.contains("quota")) {
        const json& q = j["quota"];
        requireObject(q, "'quota'");
        for (const auto& [key, value] : q.items()) {
            bool known = false;
            for (const auto& f : kTenantQuotaFields) known = known || key == f.name;
            if (!known) throw Error(ErrorCode::bad_request, "unknown field '" + key + "' in quota");
        }
        for (const auto& f : kTenantQuotaFields)
            if (q.contains(f.name)) t.quota.*f.limit = readUnsigned(q, f.name, 0, 1u << 30);
    }
    if (j.contains("policy")) {
        auto rules = parsePolicyRules(j["policy"]);
        t.deny = rules.deny;
        t.approve = rules.approve;
        t.allow = rules.allow;
    }
    if (j.contains("network")) {
        t.networkAllow = parseNetwork(j["network"]);
        t.networkSet = true;
    }
    if (j.contains("packages") && !j["packages"].is_null())
        t.packagesJson = packages::PackageRules::parse(j["packages"]).toJson().dump();
    if (j.contains("idle") && !j["idle"].is_null()) t.idleJson = idleRuleJson(parseIdleRule(j["idle"]));
    return t;
}

nlohmann::json tenantJson(const TenantRecord& t, const TenantUsage& usage) {
    json quota = json::object(), used = json::object();
    for (const auto& f : kTenantQuotaFields) {
        if (t.quota.*f.limit) quota[f.name] = *(t.quota.*f.limit);
        used[f.name] = usage.*f.used;
    }
    json j{{"name", t.name},
           {"quota", quota},
           {"policy", {{"deny", t.deny}, {"approve", t.approve}, {"allow", t.allow}}},
           {"usage", used},
           {"updated_at", t.updatedAt.empty() ? json(nullptr) : json(t.updatedAt)}};
    j["network"] = t.networkSet ? json{{"allow", t.networkAllow}} : json(nullptr);
    j["packages"] =
        t.packagesJson.empty() ? json(nullptr) : json::parse(t.packagesJson, nullptr, false);
    auto idle = idleRuleFrom(t.idleJson);
    j["idle"] = idle ? json{{"after_s", idle->afterS}, {"action", idleActionName(idle->action)}}
                     : json(nullptr);
    return j;
}

nlohmann::json keyJson(const ApiKeyRecord& k) {
    return {{"id", k.id},
            {"tenant", k.tenant},
            {"role", roleName(k.role)},
            {"name", k.name},
            {"created_at", k.createdAt},
            {"expires_at", k.expiresAt > 0 ? json(formatUnixSeconds(k.expiresAt)) : json(nullptr)}};
}

nlohmann::json sandboxJson(const SandboxRecord& r) {
    json j{
        {"id", r.id},
        {"template", r.templateName},
        {"state", r.state == SandboxState::paused && r.hibernated ? std::string("hibernated")
                                                                   : sandboxStateName(r.state)},
        {"vcpus", r.vcpus},
        {"memory_mib", r.memoryMib},
        {"disk_gib", r.diskBytes > 0 ? json(r.diskBytes / (1024ull * 1024 * 1024)) : json(nullptr)},
        {"created_at", r.createdAt},
        {"metadata", json::parse(r.metadataJson, nullptr, false)}};
    if (j["metadata"].is_discarded()) j["metadata"] = json::object();
    if (!r.error.empty()) j["error"] = r.error;
    j["timeout_s"] = r.timeoutS;
    j["on_timeout"] = r.onTimeout;
    j["paused_without_memory"] = r.pausedWithoutMemory;
    j["auto_resume"] = r.autoResume;
    // Why it sleeps: asked ("requested"), its idle rule ("idle") or its timeout.
    j["pause_reason"] = r.state == SandboxState::paused && !r.pauseReason.empty()
                            ? json(r.pauseReason)
                            : json(nullptr);
    auto idle = idleRuleFrom(r.idleJson);
    j["idle"] = idle ? json{{"after_s", idle->afterS}, {"action", idleActionName(idle->action)}}
                     : json(nullptr);
    json volumes = json::array();
    for (const auto& m : volumeMountsFrom(r.volumesJson))
        volumes.push_back({{"name", m.name}, {"path", m.path}, {"read_only", m.readOnly}});
    j["volumes"] = volumes;
    j["expires_at"] = r.expiresAt > 0 ? json(formatUnixSeconds(r.expiresAt)) : json(nullptr);
    j["snapshot"] = r.snapshotId.empty() ? json(nullptr) : json(r.snapshotId);
    // Names only: values never leave the server.
    j["secrets"] = r.secretNames;
    j["network"] = {{"allow", r.network}};
    j["packages"] = packages::PackageRules::fromStored(r.packagesJson).toJson();
    auto task = taskOf(r);
    j["task"] = task ? task->toJson() : json(nullptr);
    j["artifacts"] = r.artifacts;
    return j;
}

std::optional<SandboxRecord> listedSandboxRecord(const nlohmann::json& j) {
    auto text = [&](const char* k) {
        auto it = j.find(k);
        return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    auto number = [&](const char* k) -> std::uint64_t {
        auto it = j.find(k);
        return it != j.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
    };
    if (!j.is_object() || text("id").rfind("sbx-", 0) != 0) return std::nullopt;
    SandboxRecord r;
    r.id = text("id");
    r.templateName = text("template");
    r.createdAt = text("created_at");
    r.state = parseSandboxState(text("state"));  // error for "unavailable" and the unknown
    r.vcpus = static_cast<unsigned>(std::min<std::uint64_t>(number("vcpus"), 1024));
    r.memoryMib = static_cast<unsigned>(std::min<std::uint64_t>(number("memory_mib"), 1u << 30));
    r.diskBytes = std::min<std::uint64_t>(number("disk_gib"), 1 << 20) * (1024ull * 1024 * 1024);
    if (auto at = parseTimestamp(text("expires_at"))) r.expiresAt = *at;
    auto m = j.find("metadata");
    r.metadataJson = m != j.end() && m->is_object() ? m->dump() : "{}";
    r.tenant = text("tenant");
    return r;
}

nlohmann::json gatedExecJson(const GatedExec& g) {
    json j{{"exec_id", g.id},
           {"approval_id", g.approvalId},
           {"sandbox", g.sandboxId},
           {"state", g.state},
           {"command", g.command},
           {"class", g.commandClass},
           {"reason", g.reason},
           {"requested_at", g.requestedAt},
           {"expires_at", formatUnixSeconds(g.expiresAt)}};
    if (!g.decidedAt.empty())
        j["decision"] = {{"at", g.decidedAt}, {"by", g.decidedBy}, {"reason", g.decisionReason}};
    if (g.state == "exited") {
        j["exit_code"] = g.exitCode;
        j["stdout"] = g.stdoutData;
        j["stderr"] = g.stderrData;
    }
    if (!g.error.empty()) j["error"] = g.error;
    return j;
}

nlohmann::json auditEventJson(const AuditEvent& e) {
    json data = json::parse(e.dataJson, nullptr, false);
    if (data.is_discarded()) data = json::object();
    return {
        {"seq", e.seq}, {"at", e.at}, {"type", e.type}, {"sandbox", e.sandboxId}, {"data", data}};
}

nlohmann::json snapshotJson(const SnapshotRecord& s) {
    json j{{"id", s.id},
           {"state", snapshotStateName(s.state)},
           {"source_sandbox", s.sourceSandbox},
           {"template", s.templateName},
           {"template_digest", s.templateDigest},
           {"vcpus", s.vcpus},
           {"memory_mib", s.memoryMib},
           {"has_disk", s.hasDisk},
           {"size_bytes", s.sizeBytes},
           {"created_at", s.createdAt}};
    auto manifest = json::parse(s.manifestJson, nullptr, false);
    if (!manifest.is_discarded() && manifest.contains("files")) j["files"] = manifest["files"];
    if (!s.name.alias.empty()) {
        j["name"] = s.name.alias;
        j["tag"] = s.name.tag;
    }
    return j;
}

nlohmann::json execOutputJson(const ExecOutput& out) {
    json j{{"exit_code", out.result.exit_code}, {"stdout", out.stdoutData},
           {"stderr", out.stderrData},          {"duration_ms", out.durationMs},
           {"truncated", out.truncated},        {"timed_out", out.result.timed_out}};
    if (out.result.signal) j["signal"] = *out.result.signal;
    if (!out.result.error.empty()) {
        j["error"] = out.result.error;
        if (out.stderrData.empty()) j["stderr"] = out.result.error + "\n";
    }
    return j;
}

}  // namespace airlock::api

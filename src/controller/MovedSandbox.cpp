#include "controller/MovedSandbox.hpp"

#include <cstdio>
#include <set>

#include "core/Error.hpp"
#include "core/Ids.hpp"

namespace airlock {
using nlohmann::json;

namespace {

// Every key of `j` is one of `known`; throws otherwise.
void onlyKeys(const json& j, const std::set<std::string>& known, const char* what) {
    if (!j.is_object()) throw Error(ErrorCode::bad_request, std::string(what) + ": not an object");
    for (const auto& [k, v] : j.items())
        if (!known.count(k))
            throw Error(ErrorCode::bad_request, std::string(what) + ": unknown field '" + k + "'");
}

template <class T>
T field(const json& j, const char* key, const char* what) {
    if (!j.contains(key))
        throw Error(ErrorCode::bad_request, std::string(what) + ": '" + key + "' is missing");
    try {
        return j.at(key).get<T>();
    } catch (const json::exception&) {
        throw Error(ErrorCode::bad_request,
                    std::string(what) + ": '" + key + "' has the wrong type");
    }
}

json recordJson(const SandboxRecord& r) {
    return {{"id", r.id},
            {"tenant", r.tenant},
            {"template", r.templateName},
            {"vcpus", r.vcpus},
            {"memory_mib", r.memoryMib},
            {"created_at", r.createdAt},
            {"metadata", r.metadataJson},
            {"env", r.envJson},
            {"snapshot_id", r.snapshotId},
            {"disk", r.disk},
            {"timeout_s", r.timeoutS},
            {"on_timeout", r.onTimeout},
            {"expires_at", r.expiresAt},
            {"policy", r.policyJson},
            {"secrets_sealed", r.secretsSealed},
            {"secret_names", r.secretNames},
            {"network", r.network},
            {"packages", r.packagesJson},
            {"disk_bytes", r.diskBytes},
            {"task", r.taskJson},
            {"artifacts", r.artifacts},
            {"port_access", r.portAccess},
            {"auto_resume", r.autoResume}};
}

SandboxRecord recordFrom(const json& j) {
    const char* what = "moved sandbox record";
    onlyKeys(j,
             {"id",         "tenant", "template",       "vcpus",        "memory_mib", "created_at",
              "metadata",   "env",    "snapshot_id",    "disk",         "timeout_s",  "on_timeout",
              "expires_at", "policy", "secrets_sealed", "secret_names", "network",    "packages",
              "disk_bytes", "task",   "artifacts",      "port_access",  "auto_resume"},
             what);
    SandboxRecord r;
    r.id = field<std::string>(j, "id", what);
    if (!isValidId(r.id, "sbx-"))
        throw Error(ErrorCode::bad_request, what + std::string(": bad id"));
    r.tenant = field<std::string>(j, "tenant", what);
    if (r.tenant.empty() || r.tenant[0] == '_')
        throw Error(ErrorCode::bad_request, what + std::string(": bad tenant"));
    r.templateName = field<std::string>(j, "template", what);
    r.vcpus = field<unsigned>(j, "vcpus", what);
    r.memoryMib = field<unsigned>(j, "memory_mib", what);
    r.createdAt = field<std::string>(j, "created_at", what);
    r.metadataJson = field<std::string>(j, "metadata", what);
    r.envJson = field<std::string>(j, "env", what);
    r.snapshotId = field<std::string>(j, "snapshot_id", what);
    r.disk = field<std::string>(j, "disk", what);
    // A file name in the sandbox's directory on the receiving host.
    unsigned generation = 0;
    if (!r.disk.empty() && (std::sscanf(r.disk.c_str(), "disk-%u.qcow2", &generation) != 1 ||
                            r.disk != "disk-" + std::to_string(generation) + ".qcow2"))
        throw Error(ErrorCode::bad_request, what + std::string(": bad disk name"));
    r.timeoutS = field<std::int64_t>(j, "timeout_s", what);
    r.onTimeout = field<std::string>(j, "on_timeout", what);
    r.expiresAt = field<std::int64_t>(j, "expires_at", what);
    r.policyJson = field<std::string>(j, "policy", what);
    r.secretsSealed = field<std::string>(j, "secrets_sealed", what);
    r.secretNames = field<std::vector<std::string>>(j, "secret_names", what);
    r.network = field<std::vector<std::string>>(j, "network", what);
    r.packagesJson = field<std::string>(j, "packages", what);
    r.diskBytes = field<std::uint64_t>(j, "disk_bytes", what);
    r.taskJson = field<std::string>(j, "task", what);
    r.artifacts = field<std::vector<std::string>>(j, "artifacts", what);
    r.portAccess = field<std::string>(j, "port_access", what);
    r.autoResume = field<bool>(j, "auto_resume", what);
    for (const auto* text : {&r.metadataJson, &r.envJson, &r.policyJson})
        if (!json::accept(*text))
            throw Error(ErrorCode::bad_request,
                        what + std::string(": a stored JSON field is not JSON"));
    return r;
}

}  // namespace

json MovedSandbox::toJson() const {
    json events = json::array();
    for (const auto& e : audit)
        events.push_back({{"at", e.at}, {"type", e.type}, {"data", e.dataJson}});
    json exposed = json::array();
    for (const auto& p : ports)
        exposed.push_back({{"port", p.port}, {"token", p.token}, {"created_at", p.createdAt}});
    json j{{"record", recordJson(record)},
           {"template_digest", templateDigest},
           {"paused", paused},
           {"audit", events},
           {"ports", exposed}};
    if (!workspace.empty()) j["workspace"] = workspace;
    return j;
}

MovedSandbox MovedSandbox::fromJson(const json& j) {
    const char* what = "moved sandbox";
    onlyKeys(j, {"record", "template_digest", "paused", "audit", "ports", "workspace"}, what);
    MovedSandbox m;
    m.record = recordFrom(j.contains("record") ? j["record"] : json());
    m.templateDigest = field<std::string>(j, "template_digest", what);
    m.paused = field<bool>(j, "paused", what);
    if (j.contains("workspace")) {
        m.workspace = field<std::string>(j, "workspace", what);
        if (m.workspace.empty() || !json::accept(m.workspace))
            throw Error(ErrorCode::bad_request, what + std::string(": its workspace is not JSON"));
    }
    if (!j.contains("audit") || !j["audit"].is_array() || !j.contains("ports") ||
        !j["ports"].is_array())
        throw Error(ErrorCode::bad_request, what + std::string(": audit and ports are lists"));
    for (const auto& e : j["audit"]) {
        onlyKeys(e, {"at", "type", "data"}, "moved audit event");
        AuditEvent a;
        a.sandboxId = m.record.id;
        a.tenant = m.record.tenant;
        a.at = field<std::string>(e, "at", "moved audit event");
        a.type = field<std::string>(e, "type", "moved audit event");
        a.dataJson = field<std::string>(e, "data", "moved audit event");
        if (!json::accept(a.dataJson))
            throw Error(ErrorCode::bad_request, "moved audit event: its data is not JSON");
        m.audit.push_back(std::move(a));
    }
    for (const auto& p : j["ports"]) {
        onlyKeys(p, {"port", "token", "created_at"}, "moved port");
        ExposedPort e;
        e.sandboxId = m.record.id;
        e.port = field<unsigned>(p, "port", "moved port");
        if (e.port == 0 || e.port > 65535)
            throw Error(ErrorCode::bad_request, "moved port: bad port");
        e.token = field<std::string>(p, "token", "moved port");
        e.createdAt = field<std::string>(p, "created_at", "moved port");
        m.ports.push_back(std::move(e));
    }
    return m;
}

}  // namespace airlock

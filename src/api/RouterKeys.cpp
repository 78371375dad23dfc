// The admin routes: keys (mint with a role, list without secrets, revoke at
// once), tenants (rules, network bounds, quotas, usage) and /metrics.
#include <dirent.h>

#include <fstream>
#include <map>
#include <sstream>

#include "api/ErrorMapping.hpp"
#include "api/RequestParsing.hpp"
#include "api/Router.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Log.hpp"

namespace airlock::api {

namespace {
// Resident memory of every sandbox QEMU on the host (their command lines
// name the domain airlock-sbx-...).
std::uint64_t qemuRssBytes() {
    std::uint64_t total = 0;
    DIR* proc = ::opendir("/proc");
    if (!proc) return 0;
    while (dirent* e = ::readdir(proc)) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        std::string base = std::string("/proc/") + e->d_name;
        std::ifstream cmd(base + "/cmdline", std::ios::binary);
        std::string cmdline((std::istreambuf_iterator<char>(cmd)),
                            std::istreambuf_iterator<char>());
        if (cmdline.find("qemu-system") == std::string::npos ||
            cmdline.find("airlock-sbx-") == std::string::npos)
            continue;
        std::ifstream status(base + "/status");
        std::string line;
        while (std::getline(status, line))
            if (line.rfind("VmRSS:", 0) == 0) total += std::stoull(line.substr(6)) * 1024;
    }
    ::closedir(proc);
    return total;
}

std::string label(const std::string& v) {
    std::string out;
    for (char ch : v) {
        if (ch == '\\' || ch == '"') out += '\\';
        if (ch == '\n') {
            out += "\\n";
            continue;
        }
        out += ch;
    }
    return out;
}
}  // namespace

// POST /v1/keys
ApiResponse Router::createKey(Context& c) {
    auto request = parseKeyRequest(c.request.body, nowUnixSeconds());
    auto created = keys_.create(request.tenant, request.role, request.name, request.expiresAt);
    logInfo("api", "key " + created.record.id + " (" + roleName(request.role) + " of " +
                       request.tenant + ") created by " + c.principal.keyId);
    auto j = keyJson(created.record);
    j["key"] = created.key;  // shown once: only its hash is kept
    return jsonResponse(201, j);
}

// GET /v1/keys
ApiResponse Router::listKeys(Context& c) {
    std::optional<std::string> tenant;
    if (c.request.query.count("tenant")) {
        tenant = c.request.query.at("tenant");
        if (!isValidTenantName(*tenant)) throw Error(ErrorCode::bad_request, "bad tenant name");
    }
    nlohmann::json list = nlohmann::json::array();
    for (const auto& k : keys_.list(tenant)) list.push_back(keyJson(k));
    return jsonResponse(200, {{"keys", list}});
}

// DELETE /v1/keys/{}
ApiResponse Router::deleteKey(Context& c) {
    auto key = keys_.find(c.params[0]);
    if (!key) throw Error(ErrorCode::not_found, "no key " + c.params[0]);
    // Nobody could make keys again.
    if (key->role == Role::admin && (key->expiresAt == 0 || key->expiresAt > nowUnixSeconds()) &&
        keys_.liveAdmins(nowUnixSeconds()) <= 1)
        throw Error(ErrorCode::conflict, "key " + key->id + " is the last admin key");
    if (!keys_.remove(key->id)) throw Error(ErrorCode::not_found, "no key " + c.params[0]);
    logInfo("api", "key " + key->id + " revoked by " + c.principal.keyId);
    return ApiResponse{204, "", ""};
}

// PUT /v1/tenants/{}
ApiResponse Router::setTenant(Context& c) {
    auto t = services_.tenants.put(parseTenantUpdate(c.params[0], c.request.body));
    logInfo("api", "tenant " + t.name + " set by " + c.principal.keyId);
    return jsonResponse(200, tenantJson(t, services_.tenants.usageOf(t.name)));
}

// GET /v1/tenants/{}
ApiResponse Router::getTenant(Context& c) {
    const std::string& name = c.params[0];
    if (!isValidTenantName(name))
        throw Error(ErrorCode::bad_request, "bad tenant name '" + name + "'");
    auto t = services_.tenants.find(name);
    // A tenant exists once it has settings or keys.
    if (!t && keys_.list(name).empty()) throw Error(ErrorCode::not_found, "no tenant " + name);
    TenantRecord shown = t ? *t : TenantRecord{};
    shown.name = name;
    return jsonResponse(200, tenantJson(shown, services_.tenants.usageOf(name)));
}

// GET /v1/tenants
ApiResponse Router::listTenants(Context&) {
    std::map<std::string, TenantRecord> all;
    for (const auto& k : keys_.list(std::nullopt)) all[k.tenant].name = k.tenant;
    for (auto& t : services_.tenants.list()) all[t.name] = t;
    nlohmann::json list = nlohmann::json::array();
    for (const auto& [name, t] : all)
        list.push_back(tenantJson(t, services_.tenants.usageOf(name)));
    return jsonResponse(200, {{"tenants", list}});
}

// GET /metrics
ApiResponse Router::getMetrics(Context&) {
    return ApiResponse{200, "text/plain; version=0.0.4", metricsText()};
}

std::string Router::metricsText() {
    std::ostringstream m;
    std::map<std::pair<std::string, std::string>, std::uint64_t> sandboxes;
    for (const auto& r : services_.sandboxes.list(TenantScope::all()))
        ++sandboxes[{r.tenant, sandboxStateName(r.state)}];
    m << "# HELP airlock_sandboxes Sandboxes by tenant and state.\n# TYPE airlock_sandboxes "
         "gauge\n";
    for (const auto& [key, n] : sandboxes)
        m << "airlock_sandboxes{tenant=\"" << label(key.first) << "\",state=\"" << key.second
          << "\"} " << n << "\n";
    std::map<std::string, std::uint64_t> approvals;
    for (const auto& g : services_.gates.pending(TenantScope::all())) ++approvals[g.tenant];
    m << "# HELP airlock_approvals_pending Gated commands waiting for a decision.\n"
         "# TYPE airlock_approvals_pending gauge\n";
    for (const auto& [tenant, n] : approvals)
        m << "airlock_approvals_pending{tenant=\"" << label(tenant) << "\"} " << n << "\n";
    m << "# HELP airlock_audit_events_total Audit records by type since start (egress decisions, "
         "agent protocol "
         "errors, approvals, execs).\n# TYPE airlock_audit_events_total counter\n";
    auto counts = services_.host.auditCounts();
    for (const auto& [type, n] : counts)
        m << "airlock_audit_events_total{type=\"" << label(type) << "\"} " << n << "\n";
    // The two a dashboard alerts on, by their own names (zero until seen).
    auto count = [&](const std::string& type) {
        auto it = counts.find(type);
        return it == counts.end() ? std::uint64_t{0} : std::uint64_t(it->second);
    };
    m << "# HELP airlock_egress_decisions_total Egress requests by the proxy's decision.\n"
         "# TYPE airlock_egress_decisions_total counter\n";
    for (const char* decision : {"allowed", "denied", "failed"})
        m << "airlock_egress_decisions_total{decision=\"" << decision << "\"} "
          << count(std::string("egress.") + decision) << "\n";
    m << "# HELP airlock_agent_protocol_errors_total Agents that broke the protocol: sessions "
         "ended for a malformed or hostile frame, streams reset for broken flow control, "
         "answers that could not be read.\n# TYPE airlock_agent_protocol_errors_total counter\n"
         "airlock_agent_protocol_errors_total "
      << count("agent.protocol_error") << "\n";
    m << "# HELP airlock_qemu_rss_bytes Resident memory of all sandbox QEMU processes.\n"
         "# TYPE airlock_qemu_rss_bytes gauge\nairlock_qemu_rss_bytes "
      << qemuRssBytes() << "\n";
    m << table_.metricsText();
    m << services_.host.createLatency().exposition("airlock_create_seconds",
                                                "Create (boot or restore) to a ready agent.");
    m << services_.commands.latency().exposition("airlock_exec_seconds",
                                                     "REST exec durations.");
    return m.str();
}

}  // namespace airlock::api

// The service, template, sandbox and snapshot routes. Parsing here, the work in
// SandboxController.
#include "api/ErrorMapping.hpp"
#include "api/RequestParsing.hpp"
#include "api/Router.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/JsonFields.hpp"
#include "fleet/Fleet.hpp"

namespace airlock::api {
using nlohmann::json;

namespace {
// What every sandbox is held to, as /healthz states it.
json limitsJson(const EnforcedLimits& l) {
    return {{"cpu", l.cpuQuota ? "cgroup quota of vcpus x 100% for the whole QEMU process"
                               : "none (vcpu count only)"},
            {"memory", l.memoryOverheadMib > 0 ? "cgroup hard limit: guest memory_mib + " +
                                                     std::to_string(l.memoryOverheadMib) + " MiB"
                                               : "none"},
            {"disk",
             "qcow2 overlay bounded by the sandbox's disk_gib (its virtual size; the guest sees "
             "ENOSPC); "
             "a create needs its whole disk free above min_free_disk_mib"},
            {"disk_io", l.diskBytesPerSecond || l.diskOpsPerSecond
                            ? json{{"bytes_per_second", l.diskBytesPerSecond},
                                   {"ops_per_second", l.diskOpsPerSecond}}
                            : json("none")},
            {"min_free_disk_mib", l.minFreeDiskMib},
            {"qemu_uid", l.ownUidPerSandbox ? "one uid per sandbox" : "shared QEMU user"},
            {"host_memory",
             {{"tcg_cache_mib", l.tcgCacheMib},
              {"free_page_reporting", l.freePageReporting},
              {"kernel_samepage_merging", l.memorySharing}}}};
}
}  // namespace

// GET /healthz
ApiResponse Router::health(Context&) {
    return jsonResponse(
        200, {{"status", "ok"},
              {"accel", accelName(services_.host.accel())},
              {"agent_transport",
               services_.host.transport() == AgentTransportKind::vsock ? "vsock" : "virtio-serial"},
              {"version", version_},
              {"templates", services_.host.templates().list().size()},
              {"limits", limitsJson(services_.host.enforcedLimits())}});
}

// POST /v1/sandboxes
ApiResponse Router::createSandbox(Context& c) {
    auto request = parseCreateSandbox(c.request.body);
    // The agent never loosens its own package rules (a dry run among them).
    request.packagesTightenOnly = c.principal.role == Role::agent;
    if (request.workspace)
        return jsonResponse(201,
                            withNode(sandboxJson(workspaces().createSandbox(c.tenant, request))));
    // In a fleet, a create that arrives from a client is placed; one that
    // another node placed here is made here.
    if (fleet_ && c.principal.forwardedBy.empty())
        return placeCreate(c, request, [&](const std::string& why) {
            auto created = services_.sandboxes.create(c.tenant, request);
            auto j = withNode(sandboxJson(created));
            j["placement"] = recordPlacement(created, why);
            return jsonResponse(201, j);
        });
    auto created = services_.sandboxes.create(c.tenant, request);
    auto j = withNode(sandboxJson(created));
    if (fleet_) j["placement"] = recordPlacement(created, c.request.header("x-airlock-placement"));
    return jsonResponse(201, j);
}

// GET /v1/sandboxes: in a fleet, every node's (a node that does not answer
// lists its sandboxes as unavailable).
ApiResponse Router::listSandboxes(Context& c) {
    json list = json::array();
    // An admin sees every tenant's, each naming its tenant.
    for (const auto& r : services_.sandboxes.list(c.scope())) {
        list.push_back(withNode(sandboxJson(r)));
        if (c.admin()) list.back()["tenant"] = r.tenant;
    }
    if (fleet_ && c.principal.forwardedBy.empty()) addFleetSandboxes(c, list);
    return jsonResponse(200, {{"sandboxes", list}});
}

// GET /v1/sandboxes/{}
ApiResponse Router::getSandbox(Context& c) {
    auto j = withNode(sandboxJson(services_.sandboxes.get(c.tenant, c.params[0])));
    if (fleet_) {
        try {
            if (auto placed = fleet_->directory().find(c.params[0]))
                j["placement"] = placed->placedWhy;
        } catch (const Error&) {
            // Display only: without etcd, a sandbox here still answers.
        }
    }
    return jsonResponse(200, j);
}

// GET /v1/sandboxes/{}/metrics?since=&until= (RFC 3339)
ApiResponse Router::getSandboxMetrics(Context& c) {
    services_.sandboxes.get(c.tenant, c.params[0]);  // 404 for a sandbox that is gone
    auto bound = [&](const char* name) -> std::optional<std::int64_t> {
        auto it = c.request.query.find(name);
        if (it == c.request.query.end() || it->second.empty()) return std::nullopt;
        auto s = parseTimestamp(it->second);
        if (!s)
            throw Error(ErrorCode::bad_request,
                        std::string("'") + name + "' must be an RFC 3339 time");
        return *s * 1000;
    };
    auto since = bound("since");
    auto until = bound("until");
    if (until) *until += 999;  // the whole second
    json samples = json::array();
    for (const auto& m : services_.metrics.samples(c.tenant, c.params[0], since, until))
        samples.push_back({{"time", formatTimestamp(std::chrono::system_clock::time_point(
                                        std::chrono::milliseconds(m.unixMs)))},
                           {"cpu_count", m.cpuCount},
                           {"cpu_used_pct", m.cpuUsedPct},
                           {"mem_used_bytes", m.memUsed},
                           {"mem_total_bytes", m.memTotal},
                           {"mem_cache_bytes", m.memCache},
                           {"disk_used_bytes", m.diskUsed},
                           {"disk_total_bytes", m.diskTotal}});
    return jsonResponse(200, {{"samples", samples}});
}

// DELETE /v1/sandboxes/{}
ApiResponse Router::deleteSandbox(Context& c) {
    services_.sandboxes.destroy(c.tenant, c.params[0], "it was deleted");
    return ApiResponse{204, "", ""};
}

// POST /v1/sandboxes/{}/pause
ApiResponse Router::pauseSandbox(Context& c) {
    return jsonResponse(200, sandboxJson(services_.sandboxes.pause(c.tenant, c.params[0],
                                                                   parsePause(c.request.body))));
}

// POST /v1/sandboxes/{}/resume
ApiResponse Router::resumeSandbox(Context& c) {
    parseEmptyBody(c.request.body, "resume request");
    return jsonResponse(200, sandboxJson(services_.sandboxes.resume(c.tenant, c.params[0])));
}

// POST /v1/sandboxes/{}/timeout
ApiResponse Router::setSandboxTimeout(Context& c) {
    services_.sandboxes.get(c.tenant, c.params[0]);
    auto timeout = parseTimeoutUpdate(c.request.body);
    return jsonResponse(
        200, sandboxJson(services_.sandboxes.setTimeout(c.tenant, c.params[0], timeout)));
}

// PUT /v1/sandboxes/{}/network
ApiResponse Router::setSandboxNetwork(Context& c) {
    services_.sandboxes.get(c.tenant, c.params[0]);
    auto allow = parseNetworkUpdate(c.request.body);
    return jsonResponse(200,
                        sandboxJson(services_.sandboxes.setNetwork(c.tenant, c.params[0], allow)));
}

// PUT /v1/sandboxes/{}/secrets/{}
ApiResponse Router::setSandboxSecret(Context& c) {
    services_.sandboxes.get(c.tenant, c.params[0]);
    // The body is what a create's "secrets" holds for this name.
    auto parsed = parseSecrets(nlohmann::json{{c.params[1], parseJsonBody(c.request.body)}});
    const auto& [name, secret] = *parsed.begin();
    bool added = services_.sandboxes.setSecret(c.tenant, c.params[0], name, secret);
    nlohmann::json inject = nullptr;
    if (secret.inject)
        inject = {
            {"hosts", secret.inject->hosts},
            {"header", secret.inject->header.empty() ? nlohmann::json(nullptr)
                                                     : nlohmann::json(secret.inject->header)},
            {"format", secret.inject->header.empty() ? nlohmann::json(nullptr)
                                                     : nlohmann::json(secret.inject->format)}};
    return jsonResponse(added ? 201 : 200, {{"name", name}, {"inject", inject}});
}

// POST /v1/sandboxes/{}/snapshots
ApiResponse Router::snapshotSandbox(Context& c) {
    services_.sandboxes.get(c.tenant, c.params[0]);
    parseEmptyBody(c.request.body, "snapshot request");
    auto snap = services_.snapshotting.snapshot(c.tenant, c.params[0]);
    // The fleet learns this node holds it: its clones are placed here.
    if (fleet_) fleet_->membership().refresh();
    return jsonResponse(201, withNode(snapshotJson(snap)));
}

// GET /v1/snapshots
ApiResponse Router::listSnapshots(Context& c) {
    json list = json::array();
    for (const auto& s : services_.snapshots.list(c.scope())) {
        list.push_back(withNode(snapshotJson(s)));
        if (c.admin()) list.back()["tenant"] = s.tenant;
    }
    if (fleet_ && c.principal.forwardedBy.empty())
        addFleetList(c, "/v1/snapshots", "snapshots", list);
    return jsonResponse(200, {{"snapshots", list}});
}

// GET /v1/snapshots/{}
ApiResponse Router::getSnapshot(Context& c) {
    return jsonResponse(200, snapshotJson(services_.snapshots.get(c.tenant, c.params[0])));
}

// DELETE /v1/snapshots/{}
ApiResponse Router::deleteSnapshot(Context& c) {
    services_.snapshotting.deleteSnapshot(c.tenant, c.params[0]);
    if (fleet_) fleet_->membership().refresh();
    return ApiResponse{204, "", ""};
}

}  // namespace airlock::api

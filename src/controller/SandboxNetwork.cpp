// Egress of a sandbox: the allowlist on its record, the proxy listener on
// its agent session and the proxy variables in every command's environment.
// There is no network interface in any guest; the proxy is the only way out.
#include "controller/SandboxController.hpp"
#include "core/Log.hpp"
#include "egress/EgressAllowlist.hpp"
#include "packages/PackageRules.hpp"

namespace airlock {

namespace {
egress::EgressAllowlist allowlistOf(const SandboxRecord& r) {
    return egress::EgressAllowlist::parse(r.network);
}
}  // namespace

std::map<std::string, std::string> SandboxController::baseEnv(const SandboxRecord& r) const {
    std::map<std::string, std::string> env;
    if (config_.egress) {
        // Every client library looks at one spelling or another. no_proxy
        // keeps the guest's own servers (a dev server on localhost) direct.
        std::string proxy = "http://127.0.0.1:" + std::to_string(egress::kGuestProxyPort);
        for (const char* name :
             {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"})
            env[name] = proxy;
        // A loopback name the sandbox's allowlist names itself is meant as
        // the host's (the operator's --egress-allow-cidr exception), so it goes
        // through the proxy; 127.0.0.1 stays direct for the package listeners.
        auto allow = allowlistOf(r);
        std::string direct;
        for (const char* name : {"localhost", "127.0.0.1", "::1"}) {
            if (std::string_view(name) != "127.0.0.1" && allow.hostListedExactly(name)) continue;
            direct += (direct.empty() ? "" : ",") + std::string(name);
        }
        env["no_proxy"] = env["NO_PROXY"] = direct;
    }
    if (config_.packages) {
        // The package managers' own settings are in the template (/etc/npmrc,
        // /etc/pip.conf, apt's sources); these reach tools that read only the environment.
        if (config_.packages->serves(packages::Ecosystem::npm))
            env["npm_config_registry"] =
                "http://127.0.0.1:" + std::to_string(packages::kGuestNpmPort) + "/";
        if (config_.packages->serves(packages::Ecosystem::pypi)) {
            env["PIP_INDEX_URL"] =
                "http://127.0.0.1:" + std::to_string(packages::kGuestPypiPort) + "/simple/";
            env["PIP_TRUSTED_HOST"] = "127.0.0.1";
        }
    }
    for (auto& [k, v] : parseEnvJson(r.envJson)) env[k] = v;
    return env;
}

SandboxRecord SandboxController::setNetwork(const std::string& tenant, const std::string& id,
                                            const std::vector<std::string>& allow) {
    auto list = egress::EgressAllowlist::parse(allow);
    if (!list.empty() && !config_.egress)
        throw Error(ErrorCode::bad_request, "this server has no egress proxy");
    requireOwned(tenant, id);
    tenantLimits_.requireWithinFloor(tenant, {}, list.texts());
    auto lifecycle = lifecycleMutex(id);
    std::lock_guard op(*lifecycle);
    auto r = requireOwned(tenant, id);
    if (r.state != SandboxState::running && r.state != SandboxState::paused)
        throw Error(ErrorCode::conflict, "sandbox " + id + " is " + sandboxStateName(r.state));
    auto previous = std::exchange(r.network, list.texts());
    store_.updateNetwork(id, r.network);
    // Not attached (no agent session yet since a restart): the next
    // session's listener reads the stored list.
    if (config_.egress) config_.egress->update(id, list);
    record(id, tenant, "network.updated", {{"allow", list.texts()}, {"previous", previous}});
    return r;
}

}  // namespace airlock

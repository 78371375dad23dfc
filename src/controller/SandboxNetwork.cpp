#include "controller/SandboxNetwork.hpp"

#include "core/Error.hpp"
#include "packages/PackageRules.hpp"
#include "controller/ExecOptions.hpp"

namespace airlock {

SandboxNetwork::SandboxNetwork(std::shared_ptr<egress::EgressGateway> egress,
                               std::shared_ptr<packages::PackageGateway> packages)
    : egress_(std::move(egress)), packages_(std::move(packages)) {}

egress::EgressAllowlist SandboxNetwork::allowlist(const std::vector<std::string>& allow) const {
    auto list = egress::EgressAllowlist::parse(allow);
    if (!list.empty() && !egress_)
        throw Error(ErrorCode::bad_request, "this server has no egress proxy");
    return list;
}

std::string SandboxNetwork::packageRules(const std::string& tenantRulesJson,
                                         const CreateSandboxRequest& request,
                                         const SandboxRecord* source) const {
    auto base = tenantRulesJson.empty() ? packages::PackageRules()
                                        : packages::PackageRules::fromStored(tenantRulesJson);
    if (source) {
        // Taken whole, unless the tenant's rules tightened since: a fork
        // must not run under what the tenant no longer allows.
        auto looser = packages::PackageRules::fromStored(source->packagesJson).looserThan(base);
        if (!looser.empty())
            throw Error(ErrorCode::forbidden, "sandbox " + source->id +
                                                  "'s package rules are looser than its "
                                                  "tenant's are now (" +
                                                  looser + "): it cannot be forked");
        return source->packagesJson;
    }
    auto rules = request.packages ? request.packages->over(base) : base;
    if (request.packagesTightenOnly) {
        auto looser = rules.looserThan(base);
        if (!looser.empty())
            throw Error(ErrorCode::forbidden,
                        "an agent key may only tighten the tenant's package rules (" + looser +
                            " is looser)");
    }
    return rules.toJson().dump();
}

std::map<std::string, std::string> SandboxNetwork::commandEnv(const SandboxRecord& r) const {
    std::map<std::string, std::string> env;
    if (egress_) {
        // Every client library looks at one spelling or another. no_proxy
        // keeps the guest's own servers (a dev server on localhost) direct.
        std::string proxy = "http://127.0.0.1:" + std::to_string(egress::kGuestProxyPort);
        for (const char* name :
             {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"})
            env[name] = proxy;
        // A loopback name the sandbox's allowlist names itself is meant as
        // the host's (the operator's --egress-allow-cidr exception), so it goes
        // through the proxy; 127.0.0.1 stays direct for the package listeners.
        auto allow = egress::EgressAllowlist::parse(r.network);
        std::string direct;
        for (const char* name : {"localhost", "127.0.0.1", "::1"}) {
            if (std::string_view(name) != "127.0.0.1" && allow.hostListedExactly(name)) continue;
            direct += (direct.empty() ? "" : ",") + std::string(name);
        }
        env["no_proxy"] = env["NO_PROXY"] = direct;
    }
    if (packages_) {
        // The package managers' own settings are in the template (/etc/npmrc,
        // /etc/pip.conf, apt's sources); these reach tools that read only the environment.
        if (packages_->serves(packages::Ecosystem::npm))
            env["npm_config_registry"] =
                "http://127.0.0.1:" + std::to_string(packages::kGuestNpmPort) + "/";
        if (packages_->serves(packages::Ecosystem::pypi)) {
            env["PIP_INDEX_URL"] =
                "http://127.0.0.1:" + std::to_string(packages::kGuestPypiPort) + "/simple/";
            env["PIP_TRUSTED_HOST"] = "127.0.0.1";
        }
    }
    for (auto& [k, v] : parseEnvJson(r.envJson)) env[k] = v;
    return env;
}

void SandboxNetwork::apply(const std::string& sandboxId,
                           const egress::EgressAllowlist& list) const {
    if (egress_) egress_->update(sandboxId, list);
}

std::vector<unsigned> SandboxNetwork::internalPorts() const {
    auto ports = egress_ ? egress_->listenerPorts() : egress::EgressGateway::defaultListenerPorts();
    for (unsigned p : packages_ ? packages_->listenerPorts()
                                : packages::PackageGateway::defaultListenerPorts())
        ports.push_back(p);
    return ports;
}

}  // namespace airlock

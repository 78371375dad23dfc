#include "controller/SandboxAgents.hpp"

#include "agentclient/AgentProtocolError.hpp"
#include "controller/SandboxSecrets.hpp"
#include "core/Log.hpp"
#include "egress/EgressAllowlist.hpp"
#include "packages/PackageRules.hpp"

namespace airlock {

SandboxAgents::SandboxAgents(Parts parts)
    : p_(std::move(parts)),
      sessions_([this](const std::string& id) { return connect(id, p_.reconnectTimeout); },
                [this](const std::string& id, const std::shared_ptr<AgentConnection>& agent) {
                    watch(id, agent);
                    // The old session's listeners went with it.
                    if (auto r = p_.sandboxes.find(id)) attachListeners(*r, agent);
                }) {}

std::shared_ptr<AgentConnection> SandboxAgents::connect(const std::string& sandboxId,
                                                        std::chrono::milliseconds timeout) {
    try {
        return p_.connector(p_.endpointOf(sandboxId), timeout);
    } catch (const AgentProtocolError& e) {
        try {
            protocolError(sandboxId, e.what(), true);
        } catch (const std::exception& auditError) {
            logError("controller",
                     "auditing the protocol error of " + sandboxId + ": " + auditError.what());
        }
        throw;
    }
}

void SandboxAgents::adopt(const SandboxRecord& sandbox, std::shared_ptr<AgentConnection> agent) {
    watch(sandbox.id, agent);
    auto injections = attachListeners(sandbox, agent);
    if (injections) trustEgressCa(sandbox, *agent, *injections);
    sessions_.install(sandbox.id, std::move(agent));
}

void SandboxAgents::trustEgressCa(const SandboxRecord& r, AgentConnection& agent,
                                  const egress::SandboxInjections& injections) {
    // Before any command runs: what it reaches through the proxy is signed
    // by this CA for the hosts its injected secrets go to.
    protocol::ExecRequest install;
    install.argv = {"sh", "-c", SandboxSecrets::guestTrustScript()};
    install.user = "root";
    install.stdin_data = injections.ca->certificatePem();
    auto done = agent.exec(install, 4096, std::chrono::seconds(60));
    if (done.result.exit_code != 0)
        throw Error(
            ErrorCode::agent_error,
            "sandbox " + r.id + " could not install its egress CA: " +
                (done.result.error.empty() ? done.stderrData.substr(0, 300) : done.result.error));
}

void SandboxAgents::refreshInjections(const SandboxRecord& r, bool trustCa) {
    auto injections = p_.injectionsOf ? p_.injectionsOf(r) : nullptr;
    if (trustCa && injections) trustEgressCa(r, *sessions_.get(r.id), *injections);
    if (p_.egress) p_.egress->setInjections(r.id, injections);
}

void SandboxAgents::retire(const std::string& sandboxId, const std::string& why) {
    if (p_.egress) p_.egress->detach(sandboxId);
    if (p_.packages) p_.packages->detach(sandboxId);
    sessions_.retire(sandboxId, why);
}

void SandboxAgents::watch(const std::string& sandboxId,
                          const std::shared_ptr<AgentConnection>& agent) {
    agent->onProtocolError([this, sandboxId](const std::string& why, bool sessionEnded) {
        protocolError(sandboxId, why, sessionEnded);
    });
}

void SandboxAgents::protocolError(const std::string& sandboxId, const std::string& why,
                                  bool sessionEnded) {
    auto r = p_.sandboxes.find(sandboxId);
    p_.audit.record(sandboxId, r ? r->tenant : std::string(), "agent.protocol_error",
                    {{"reason", why}, {"session_ended", sessionEnded}});
}

std::shared_ptr<const egress::SandboxInjections> SandboxAgents::attachListeners(
    const SandboxRecord& r, const std::shared_ptr<AgentConnection>& agent) {
    auto injections = p_.injectionsOf ? p_.injectionsOf(r) : nullptr;
    // Every sandbox has the egress proxy, also with an empty allowlist: it
    // then refuses everything, and the attempts are in the audit log.
    if (p_.egress) {
        p_.egress->attach(r.id, r.tenant, agent, egress::EgressAllowlist::parse(r.network));
        p_.egress->setInjections(r.id, injections);
    }
    if (p_.packages)
        p_.packages->attach(r.id, r.tenant, agent,
                            packages::PackageRules::fromStored(r.packagesJson));
    return injections;
}

}  // namespace airlock

#include "support/FakeSandboxAccess.hpp"

#include "core/Error.hpp"

namespace airlock::test {

FakeSandboxAccess::FakeSandboxAccess() : agent_(guest_.connect()) {
    sandbox.id = "sbx-aaaaaaaaaaaaaaaaaaaa";  // a valid id: the preview check reads it
    sandbox.tenant = "t1";
    sandbox.state = SandboxState::running;
}

SandboxRecord FakeSandboxAccess::requireOwned(const std::string& tenant, const std::string& id) {
    if (tenant != sandbox.tenant || id != sandbox.id)
        throw Error(ErrorCode::not_found, "no sandbox " + id);
    return sandbox;
}

SandboxRecord FakeSandboxAccess::requireRunning(const std::string& tenant, const std::string& id) {
    auto r = requireOwned(tenant, id);
    requireRunningState(r);
    return r;
}

std::optional<SandboxRecord> FakeSandboxAccess::find(const std::string& sandboxId) {
    if (sandboxId != sandbox.id) return std::nullopt;
    return sandbox;
}

std::shared_ptr<AgentConnection> FakeSandboxAccess::agentFor(const std::string& sandboxId) {
    if (sandboxId != sandbox.id) throw Error(ErrorCode::not_found, "no agent of " + sandboxId);
    return agentOverride ? agentOverride : agent_;
}

SecretMasker FakeSandboxAccess::guestOutputMasker(const SandboxRecord&) const {
    return SecretMasker(secrets);
}

void FakeSandboxAccess::checkWrite(const SandboxRecord&, const std::string& path) {
    if (path.rfind(writeScope, 0) != 0)
        throw Error(ErrorCode::forbidden, path + " is outside the write scope");
}

void FakeSandboxAccess::requireFreeSpace(const std::string& what, std::uint64_t) const {
    if (diskFull) throw Error(ErrorCode::insufficient_storage, what + " refused: the disk is full");
}

PreparedCommand FakeSandboxAccess::prepareCommand(const SandboxRecord& r,
                                                  const ExecOptions& options, const char* door) {
    if (!policyAllows) {
        record(r.id, r.tenant, "exec.denied", {{"path", door}}, nullptr);
        throw Error(ErrorCode::policy_denied, "denied by the test's policy");
    }
    ExecOptions withSecrets = options;
    for (std::size_t i = 0; i < secrets.size(); ++i)
        withSecrets.env["SECRET_" + std::to_string(i)] = secrets[i];
    return PreparedCommand{toAgentRequest(withSecrets, {}), SecretMasker(secrets)};
}

void FakeSandboxAccess::record(const std::string& sandboxId, const std::string& tenant,
                               const std::string& type, const nlohmann::json& data,
                               const SecretMasker* masker) {
    std::lock_guard lock(mutex_);
    records_.push_back({sandboxId, tenant, type, masker ? maskJsonStrings(data, *masker) : data});
}

std::vector<FakeSandboxAccess::Record> FakeSandboxAccess::records() {
    std::lock_guard lock(mutex_);
    return records_;
}

std::vector<FakeSandboxAccess::Record> FakeSandboxAccess::recordsOf(const std::string& type) {
    std::vector<Record> out;
    for (auto& r : records())
        if (r.type == type) out.push_back(r);
    return out;
}

}  // namespace airlock::test

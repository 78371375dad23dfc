#pragma once
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "controller/SandboxAccess.hpp"
#include "support/InProcessAgent.hpp"

namespace airlock::test {

// The controller's view for the guest services' unit tests: one sandbox of
// tenant "t1", served by the real agent in this process; a write scope, a
// policy switch, secrets and the audit records it got.
class FakeSandboxAccess : public SandboxAccess {
  public:
    FakeSandboxAccess();

    SandboxRecord sandbox;
    std::vector<std::string> secrets;  // masked, and given to commands as SECRET_<n>
    std::string writeScope = "/";      // writes outside it: Error(forbidden)
    bool policyAllows = true;
    bool diskFull = false;
    // Another guest behind the sandbox (a scripted, hostile one); none: the real agent.
    std::shared_ptr<AgentConnection> agentOverride;
    struct Record {
        std::string sandboxId, tenant, type;
        nlohmann::json data;
    };
    std::vector<Record> records();
    std::vector<Record> recordsOf(const std::string& type);

    SandboxRecord requireOwned(const std::string& tenant, const std::string& id) override;
    SandboxRecord requireRunning(const std::string& tenant, const std::string& id) override;
    std::optional<SandboxRecord> find(const std::string& sandboxId) override;
    std::shared_ptr<AgentConnection> agentFor(const std::string& sandboxId) override;
    SecretMasker guestOutputMasker(const SandboxRecord& r) const override;
    SecretMasker streamMasker(const SandboxRecord& r, const std::string&) const override {
        return guestOutputMasker(r);
    }
    void checkWrite(const SandboxRecord& r, const std::string& path) override;
    void requireFreeSpace(const std::string& what, std::uint64_t needBytes) const override;
    PreparedCommand prepareCommand(const SandboxRecord& r, const ExecOptions& options,
                                   const char* door) override;
    void record(const std::string& sandboxId, const std::string& tenant, const std::string& type,
                const nlohmann::json& data, const SecretMasker* masker) override;

  private:
    InProcessAgent guest_;
    std::shared_ptr<AgentConnection> agent_;
    std::mutex mutex_;
    std::vector<Record> records_;
};

}  // namespace airlock::test

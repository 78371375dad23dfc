#pragma once
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "controller/AuditRecorder.hpp"
#include "controller/WorkspaceSandboxes.hpp"
#include "core/TimerQueue.hpp"
#include "store/AuditStore.hpp"
#include "store/Database.hpp"
#include "support/InProcessAgent.hpp"
#include "support/TestEnv.hpp"

namespace airlock::test {

// The controller's side of the workspace service for its parts' unit tests:
// sandboxes that are records plus a real agent in this process (their
// working trees are host directories, so the service's guest user must be
// one this host has: root), real approval gates over a store, and every
// event the service recorded.
class FakeWorkspaceSandboxes : public WorkspaceSandboxes {
  public:
    FakeWorkspaceSandboxes();
    ~FakeWorkspaceSandboxes() override;

    struct Event {
        std::string sandboxId, tenant, type;
        nlohmann::json data;
    };
    std::vector<Event> events(const std::string& type);
    std::vector<std::string> created();    // ids, in order
    std::vector<std::string> destroyed();  // ids, in order
    std::vector<std::string> watched();    // paths given to watchFiles
    // A human's decision on a push approval, handed to the publish hook as
    // the controller does. Returns the decided record.
    GatedExec decide(const std::string& tenant, const std::string& approvalId, bool approve);
    // The hooks the service installed (empty once it is gone).
    WriteGuard writeGuard();

    SandboxRecord create(const std::string& tenant, const CreateSandboxRequest& request) override;
    void destroy(const std::string& tenant, const std::string& id, const std::string& why) override;
    SandboxRecord get(const std::string& tenant, const std::string& id) override;
    std::shared_ptr<AgentConnection> runningAgent(const std::string& tenant,
                                                  const std::string& id) override;
    void recordEvent(const SandboxRecord& r, const std::string& type,
                     const nlohmann::json& data) override;
    void requireFreeSpace(const std::string&, std::uint64_t) const override {}
    bool watchFiles(const std::string& tenant, const std::string& id,
                    const std::string& path) override;
    ApprovalGates& gates() override { return gates_; }
    void setWorkspaceHooks(WriteGuard guard, PublishHandler publish) override;
    void setExtraSecrets(ExtraSecrets) override {}
    void setWorkspaceTravel(PackWorkspace, ArriveWorkspace) override {}

    // Stops a sandbox without removing it (runningAgent: Error(conflict)).
    void pause(const std::string& id);

  private:
    TempDir dir_;
    Database db_{dir_.path() + "/state.db"};
    GatedExecStore gatedStore_{db_};
    AuditStore auditStore_{db_};
    AuditRecorder audit_{auditStore_};
    SandboxSecrets secrets_;
    std::unique_ptr<TimerQueue> timers_ = std::make_unique<TimerQueue>();
    ApprovalGates gates_;
    InProcessAgent guest_;
    std::shared_ptr<AgentConnection> agent_;
    std::mutex mutex_;
    std::map<std::string, SandboxRecord> sandboxes_;
    std::vector<std::string> created_, destroyed_, watched_;
    std::vector<Event> events_;
    WriteGuard guard_;
    PublishHandler publish_;
};

}  // namespace airlock::test

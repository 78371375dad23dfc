#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/Database.hpp"
#include "store/TenantScope.hpp"

namespace airlock {

// An exec the command policy held for a human decision, and what became of
// it: pending_approval -> running -> exited | failed, or denied | expired.
struct GatedExec {
    std::string id;          // ex-...
    std::string approvalId;  // apr-...
    std::string sandboxId;
    std::string tenant;
    std::string requestJson;  // the exec as submitted (ExecOptions)
    std::string command;      // readable: the shell string or the argv joined
    std::string commandClass;
    std::string reason;  // why the policy wants a decision
    std::string state = "pending_approval";
    std::string requestedAt;
    std::int64_t expiresAt = 0;  // unix seconds
    std::string decidedAt, decidedBy, decisionReason;
    std::int64_t exitCode = -1;
    std::string stdoutData, stderrData, error;
    // SHA-256 over the canonical request (ApprovalGates::requestDigest): what
    // an approval binds; "" for a record from before digests (never runs).
    std::string requestDigest;
    // What the approver is shown of the request (JSON, secrets masked).
    std::string shownJson;
};

class GatedExecStore {
  public:
    explicit GatedExecStore(Database& db);
    void insert(const GatedExec& e);
    // pending_approval -> state, only if still pending; false when it was not.
    bool decide(const std::string& id, const std::string& state, const std::string& decidedAt,
                const std::string& decidedBy, const std::string& reason);
    void finish(const std::string& id, const std::string& state, std::int64_t exitCode,
                const std::string& out, const std::string& err, const std::string& error);
    std::optional<GatedExec> find(const std::string& id);
    std::optional<GatedExec> findByApproval(const std::string& approvalId);
    // The newest parked request of a sandbox with exactly this request JSON
    // (a package version waiting for, or given, an approval).
    std::optional<GatedExec> findLatestRequest(const std::string& sandboxId,
                                               const std::string& requestJson);
    std::vector<GatedExec> pending(const TenantScope& scope);
    // Approved and started, not finished: what a restart interrupted.
    std::vector<GatedExec> running(const std::string& idPrefix);

  private:
    Database& db_;
};

}  // namespace airlock

#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "controller/SandboxEvidenceSource.hpp"
#include "evidence/EvidenceKey.hpp"
#include "evidence/EvidenceModel.hpp"
#include "evidence/EvidenceReview.hpp"
#include "workspace/WorkspaceEvidence.hpp"
#include "store/EvidenceStore.hpp"

namespace airlock {

class WorkspaceEvidenceSource;

struct EvidenceConfig {
    std::string dataDir;  // DATA/evidence: keys/ and bundles/
    std::int64_t retentionDays = 30;
    std::uint64_t maxArtifactFileBytes = 10u << 20;
    std::uint64_t maxArtifactBytes = 64u << 20;  // all artifacts of one bundle
    std::size_t maxArtifactFiles = 200;
    std::size_t maxWalkEntries = 20000;  // directory entries looked at to find artifacts
    // Where artifact globs start without a workspace, and whom the guest
    // reads them as (the agent's own user: it cannot collect what it cannot read).
    std::string defaultArtifactRoot = "/home/user";
    std::string artifactUser = "user";
};

// Seals evidence bundles from what the daemon recorded about a sandbox (its
// audit log, workspace, package and egress records, test runs) and what it
// produced (artifacts), signs them with the evidence key, keeps them past
// the sandbox for the retention period, and records human reviews.
class EvidenceService {
  public:
    // `sandboxes`: the controller's evidence view; `workspaces`: the
    // workspace service (none: no sandbox has a workspace).
    EvidenceService(EvidenceConfig config, SandboxEvidenceSource& sandboxes,
                    WorkspaceEvidenceSource* workspaces, EvidenceStore& store);

    // kind: manual (POST .../evidence) or final (at delete).
    EvidenceRecord seal(const std::string& tenant, const std::string& sandboxId,
                        const std::string& kind = "manual");
    std::vector<EvidenceRecord> list(const std::string& tenant, const std::string& sandboxId);
    EvidenceRecord get(const std::string& tenant, const std::string& id);
    std::string bundleBytes(const EvidenceRecord& r) const;
    // Every public key that verifies a bundle, the active one and the retired.
    std::vector<EvidenceKey::PublicKey> keys() const;
    // A human's decision on a bundle: recorded in the audit log and as a
    // signed in-toto statement (DSSE) served beside the bundle.
    EvidenceReview review(const std::string& tenant, const std::string& id,
                          ReviewDecision decision, const std::string& reason,
                          const std::string& reviewer);
    // Error(not_found) before any review.
    EvidenceReview reviewOf(const std::string& tenant, const std::string& id);
    // The latest bundle of a sandbox whose workspace final tree is `tree`;
    // none when no bundle covers exactly that tree.
    std::optional<EvidenceBrief> latestForTree(const std::string& sandboxId,
                                               const std::string& tree);

    // The controller's delete hooks: a final bundle for a sandbox with a task
    // or a workspace (a failure is logged and audited, the delete goes on);
    // then its bundles start their retention period.
    void beforeDelete(const SandboxRecord& r);
    void afterDelete(const std::string& sandboxId);
    // Removes bundles past their retention.
    void collectExpired();

    std::optional<std::string> ownerOf(const std::string& evidenceId);
    // A fleet's directory of bundles (fleet::ObjectDirectory), told of each
    // bundle sealed here and each removed; a failing hook is logged, never
    // fails the seal.
    void setDirectoryHooks(std::function<void(const EvidenceRecord&)> sealed,
                           std::function<void(const std::string&)> removed);

  private:
    struct Gathered;
    // degraded: why a full seal failed ("" for a full one); a degraded bundle
    // reads nothing from the guest (no artifacts, no drain) and says why.
    Gathered gather(const SandboxRecord& r, const std::string& bundleId,
                    const std::string& degraded);
    EvidenceRecord sealBundle(const std::string& tenant, const std::string& sandboxId,
                              const std::string& kind, const std::string& degraded);
    std::string bundlePath(const std::string& id) const;
    std::shared_ptr<std::mutex> sandboxLock(const std::string& id);

    EvidenceConfig config_;
    SandboxEvidenceSource& sandboxes_;
    WorkspaceEvidenceSource* workspaces_;
    EvidenceStore& store_;
    EvidenceKey key_;
    std::mutex locksGuard_;
    std::map<std::string, std::shared_ptr<std::mutex>> locks_;
    std::function<void(const EvidenceRecord&)> sealedHook_;
    std::function<void(const std::string&)> removedHook_;
};

}  // namespace airlock

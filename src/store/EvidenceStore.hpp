#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/Database.hpp"
#include "store/TenantScope.hpp"

namespace airlock {

// A sealed evidence bundle: the file lives under DATA/evidence/bundles, the
// row says whose it is, what it holds in short and how long it is kept.
struct EvidenceRecord {
    std::string id;  // evd-...
    std::string sandboxId, tenant;
    std::string createdAt;
    std::string kind;  // manual | final (sealed at delete)
    std::string sha256;
    std::uint64_t size = 0;
    std::string summaryJson = "{}";  // findings by kind and severity, test result, counts
    std::int64_t expiresAt = 0;      // unix seconds; 0 while its sandbox lives
    std::string reviewJson;          // the latest human review decision; "" when none
};

class EvidenceStore {
  public:
    explicit EvidenceStore(Database& db);
    void insert(const EvidenceRecord& r);
    std::optional<EvidenceRecord> find(const std::string& id);
    std::vector<EvidenceRecord> listForSandbox(const std::string& sandboxId,
                                               const TenantScope& scope);
    // Its sandbox is gone: kept until expiresAt.
    void setExpiry(const std::string& sandboxId, std::int64_t expiresAt);
    void setReview(const std::string& id, const std::string& reviewJson);
    std::vector<EvidenceRecord> expired(std::int64_t now);
    void remove(const std::string& id);

  private:
    Database& db_;
};

}  // namespace airlock

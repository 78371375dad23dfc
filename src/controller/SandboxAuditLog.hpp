#pragma once
#include <string>
#include <vector>

#include "store/AuditStore.hpp"

namespace airlock {

// A sandbox's audit log as its tenant reads it (Error(not_found) for
// another tenant's sandbox).
class SandboxAuditLog {
  public:
    virtual ~SandboxAuditLog() = default;
    virtual std::vector<AuditEvent> audit(const std::string& tenant, const std::string& id,
                                          const AuditQuery& query) = 0;
    // Every sandbox's events of the scope after `after` (the live feed), and
    // the newest event's seq.
    virtual std::vector<AuditEvent> auditFeed(const TenantScope& scope, std::int64_t after,
                                              int limit) = 0;
    virtual std::int64_t auditHead() = 0;
};

}  // namespace airlock

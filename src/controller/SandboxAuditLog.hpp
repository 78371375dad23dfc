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
};

}  // namespace airlock

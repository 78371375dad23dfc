#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "store/Database.hpp"

namespace airlock {

struct AuditEvent {
    std::int64_t seq = 0;  // increasing; the pagination cursor
    std::string sandboxId;
    std::string tenant;
    std::string at;    // RFC 3339
    std::string type;  // sandbox.created, exec.denied, approval.approved, ...
    std::string dataJson = "{}";
};

struct AuditQuery {
    std::string type;        // exact or "prefix." (e.g. "exec.")
    std::string since;       // RFC 3339, inclusive
    std::int64_t after = 0;  // seq cursor
    int limit = 200;
};

// Append-only per sandbox: rows are inserted, never updated; they outlive the
// sandbox until the retention period passes (prune()).
class AuditStore {
  public:
    explicit AuditStore(Database& db);
    void append(const AuditEvent& e);
    std::vector<AuditEvent> query(const std::string& sandboxId, const AuditQuery& q);
    // The tenant that owns a sandbox's events (also after its deletion); empty if none.
    std::string tenantOf(const std::string& sandboxId);
    // Retention: drops the events of deleted sandboxes whose last event is
    // older than `olderThan` (RFC 3339); returns how many went.
    std::int64_t prune(const std::string& olderThan);

  private:
    Database& db_;
};

}  // namespace airlock

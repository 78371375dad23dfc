#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "store/Database.hpp"
#include "store/TenantScope.hpp"

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
    // Every sandbox's events of the scope after `after`, in order: the live
    // feed (GET /v1/events) and its resumption.
    std::vector<AuditEvent> feed(const TenantScope& scope, std::int64_t after, int limit);
    // The newest event's seq (0 when none): where a feed with no cursor starts.
    std::int64_t head();
    // Called after every append (set once, before any append): wakes the feed.
    void onAppend(std::function<void()> listener) { appended_ = std::move(listener); }
    // The tenant that owns a sandbox's events (also after its deletion); empty if none.
    std::string tenantOf(const std::string& sandboxId);
    // Retention: drops the events of deleted sandboxes whose last event is
    // older than `olderThan` (RFC 3339); returns how many went.
    std::int64_t prune(const std::string& olderThan);

  private:
    Database& db_;
    std::function<void()> appended_;
};

}  // namespace airlock

#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace airlock {

// Counts each tenant's commands in flight against its concurrent_execs
// quota. A slot is held from the check until the last copy of it goes (the
// command's completion), and may outlive this object safely.
class TenantExecSlots {
  public:
    using Slot = std::shared_ptr<void>;
    TenantExecSlots();
    // Error(quota_exceeded) when the tenant already runs `limit` commands.
    Slot acquire(const std::string& tenant, std::optional<std::uint64_t> limit);
    std::uint64_t inFlight(const std::string& tenant) const;

  private:
    struct Counts {
        std::mutex mutex;
        std::map<std::string, std::uint64_t> byTenant;
    };
    std::shared_ptr<Counts> counts_;
};

}  // namespace airlock

#include "controller/TenantExecSlots.hpp"

#include "core/Error.hpp"

namespace airlock {

TenantExecSlots::TenantExecSlots() : counts_(std::make_shared<Counts>()) {}

TenantExecSlots::Slot TenantExecSlots::acquire(const std::string& tenant,
                                               std::optional<std::uint64_t> limit) {
    {
        std::lock_guard lock(counts_->mutex);
        auto& n = counts_->byTenant[tenant];
        if (limit && n + 1 > *limit) {
            if (n == 0) counts_->byTenant.erase(tenant);
            throw Error(ErrorCode::quota_exceeded, "quota exceeded: concurrent_execs (" +
                                                       std::to_string(n) + " of " +
                                                       std::to_string(*limit) + " running)");
        }
        ++n;
    }
    // The release holds the counts, not this object: a completion may come late.
    return Slot(new std::string(tenant), [counts = counts_](void* p) {
        std::unique_ptr<std::string> owner(static_cast<std::string*>(p));
        std::lock_guard lock(counts->mutex);
        auto it = counts->byTenant.find(*owner);
        if (it != counts->byTenant.end() && it->second > 0 && --it->second == 0)
            counts->byTenant.erase(it);
    });
}

std::uint64_t TenantExecSlots::inFlight(const std::string& tenant) const {
    std::lock_guard lock(counts_->mutex);
    auto it = counts_->byTenant.find(tenant);
    return it == counts_->byTenant.end() ? 0 : it->second;
}

}  // namespace airlock

#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace airlock::api {

// Counts what each tenant has in flight (JSON requests until answered,
// streams until closed) against one limit, so one tenant cannot take every
// worker, agent stream and socket: beyond it, Error(too_many_requests).
class TenantLimiter {
  public:
    explicit TenantLimiter(std::size_t perTenant) : perTenant_(perTenant) {}
    // A held slot; released when the last copy goes.
    using Slot = std::shared_ptr<void>;
    Slot acquire(const std::string& tenant);
    std::size_t inUse(const std::string& tenant) const;
    std::size_t limit() const { return perTenant_; }

  private:
    // Shared with every slot: a slot may be released after the limiter is
    // gone (an exec completing while the daemon shuts down).
    struct State {
        std::mutex mutex;
        std::map<std::string, std::size_t> inUse;
    };
    std::size_t perTenant_;
    std::shared_ptr<State> state_ = std::make_shared<State>();
};

// Open connections against one cap (the HTTP server's accept loop).
class ConnectionCounter {
  public:
    explicit ConnectionCounter(std::size_t max) : max_(max) {}
    // Empty when the cap is reached.
    std::shared_ptr<void> tryAcquire();
    std::size_t open() const;
    std::size_t max() const { return max_; }

  private:
    struct State {
        std::mutex mutex;
        std::size_t open = 0;
    };
    std::size_t max_;
    std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace airlock::api

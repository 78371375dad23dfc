#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace airlock::api {

// Wakes the live event streams when the audit log grows: each stream
// subscribes with a waker and reads the log itself from its own cursor, so
// a slow stream costs nothing here and misses nothing.
class EventFeed {
  public:
    using Waker = std::function<void()>;
    // The subscription lasts as long as the token.
    std::shared_ptr<void> subscribe(Waker waker);
    void notify();
    std::size_t subscribers();

  private:
    std::mutex mutex_;
    std::uint64_t next_ = 0;
    std::map<std::uint64_t, Waker> wakers_;
};

}  // namespace airlock::api

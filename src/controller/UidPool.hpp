#pragma once
#include <cstdint>
#include <mutex>
#include <set>

namespace airlock {

// The unprivileged uids QEMU processes run under, one per sandbox (a
// compromised QEMU can reach nothing of another sandbox's): the lowest free
// uid of a fixed range is handed out and returned when the sandbox is gone.
class UidPool {
public:
    UidPool(std::uint32_t base, std::uint32_t count) : base_(base), count_(count) {}
    bool enabled() const { return count_ > 0; }
    // Throws Error(unavailable) when every uid of the range is in use.
    std::uint32_t acquire();
    // Marks a uid found in use (records kept across a restart).
    void markUsed(std::uint32_t uid);
    void release(std::uint32_t uid);
    std::size_t inUse() const;

private:
    std::uint32_t base_, count_;
    mutable std::mutex mutex_;
    std::set<std::uint32_t> used_;
};

}  // namespace airlock

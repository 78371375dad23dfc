#include "core/KeyedMutexes.hpp"

namespace airlock {

std::shared_ptr<std::mutex> KeyedMutexes::of(const std::string& key) {
    std::lock_guard lock(guard_);
    auto& m = mutexes_[key];
    if (!m) m = std::make_shared<std::mutex>();
    return m;
}

void KeyedMutexes::forget(const std::string& key) {
    std::lock_guard lock(guard_);
    mutexes_.erase(key);
}

std::size_t KeyedMutexes::size() const {
    std::lock_guard lock(guard_);
    return mutexes_.size();
}

}  // namespace airlock

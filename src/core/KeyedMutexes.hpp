#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace airlock {

// One mutex per key (a sandbox's lifecycle, a tenant's quota check), made on
// first use. Holders keep theirs alive through the shared_ptr, so forgetting
// a key while someone holds its mutex is safe: the next caller gets a new one
// only after the key is gone for good (a deleted sandbox's id is never reused).
class KeyedMutexes {
  public:
    std::shared_ptr<std::mutex> of(const std::string& key);
    void forget(const std::string& key);
    std::size_t size() const;

  private:
    mutable std::mutex guard_;
    std::map<std::string, std::shared_ptr<std::mutex>> mutexes_;
};

}  // namespace airlock

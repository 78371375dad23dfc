#pragma once
#include <chrono>
#include <map>
#include <mutex>

#include "fleet/KeyValueStore.hpp"
#include "store/ApiKeys.hpp"

namespace airlock::fleet {

// A fleet's API keys in etcd, as hashes only: /airlock/keys/hash/<sha256>
// holds the key's record (what every authenticated call reads, one
// linearizable get), /airlock/keys/id/<id> its hash. A key minted on any
// node works on every node; a revoked one is refused everywhere on the next
// call. Both keys of a record change in one transaction.
//
// When etcd cannot answer (no quorum), a key this node saw in the last ten
// minutes is taken as it was then: running sandboxes stay reachable on
// healthy nodes; a revocation made meanwhile holds once etcd is back.
class FleetApiKeys final : public ApiKeys {
  public:
    explicit FleetApiKeys(KeyValueStore& store) : store_(store) {}
    using ApiKeys::create;
    Created create(const std::string& tenant, Role role, const std::string& name,
                   std::int64_t expiresAt) override;
    std::optional<Created> createFirstAdmin() override;
    std::optional<ApiKeyRecord> findValid(const std::string& key, std::int64_t now) override;
    std::optional<ApiKeyRecord> find(const std::string& id) override;
    std::vector<ApiKeyRecord> list(const std::optional<std::string>& tenant) override;
    bool remove(const std::string& id) override;
    std::vector<ApiKeyRecord> drivers(const std::string& tenant, std::int64_t now) override;
    std::size_t liveAdmins(std::int64_t now) override;
    bool empty() override;

  private:
    struct Seen {
        std::optional<ApiKeyRecord> record;  // nullopt: known absent
        std::chrono::steady_clock::time_point at;
    };
    std::optional<ApiKeyRecord> remembered(std::map<std::string, Seen>& seen, const std::string& k);
    void remember(std::map<std::string, Seen>& seen, const std::string& k,
                  const std::optional<ApiKeyRecord>& r);
    std::mutex mutex_;
    std::map<std::string, Seen> byHash_, byId_;
    Created mint(const std::string& tenant, Role role, const std::string& name,
                 std::int64_t expiresAt, bool first);
    KeyValueStore& store_;
};

}  // namespace airlock::fleet

#pragma once
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "fleet/KeyValueStore.hpp"

namespace airlock::test {

// etcd's key-value semantics in memory for unit tests of fleet logic:
// revisions, create/mod revisions, versions, transactions applied
// atomically, leases that a test expires by hand. `unavailable(true)`
// makes every call throw Error(unavailable), as etcd without quorum.
class FakeKeyValueStore final : public fleet::KeyValueStore {
  public:
    std::optional<fleet::StoredKey> get(const std::string& key) override;
    std::vector<fleet::StoredKey> list(const std::string& prefix) override;
    std::int64_t put(const std::string& key, const std::string& value,
                     std::int64_t lease = 0) override;
    bool remove(const std::string& key) override;
    fleet::TxnResult txn(const std::vector<fleet::KeyCompare>& compare,
                         const std::vector<fleet::KeyOp>& success,
                         const std::vector<fleet::KeyOp>& failure) override;
    std::int64_t grantLease(std::chrono::seconds ttl) override;
    std::int64_t keepAlive(std::int64_t lease) override;
    void revokeLease(std::int64_t lease) override;

    // The lease runs out: its keys go.
    void expire(std::int64_t lease);
    void unavailable(bool on);
    // Runs inside every txn before it is applied (a test interleaves another
    // client's write there).
    void beforeTxn(std::function<void()> hook);
    std::int64_t txnCount() const;

  private:
    void check() const;
    void putLocked(const std::string& key, const std::string& value, std::int64_t lease);
    bool removeLocked(const std::string& key);
    mutable std::mutex mutex_;
    std::map<std::string, fleet::StoredKey> keys_;
    std::map<std::int64_t, std::int64_t> leases_;  // id -> ttl
    std::int64_t revision_ = 1;
    std::int64_t nextLease_ = 100;
    std::int64_t txns_ = 0;
    bool unavailable_ = false;
    std::function<void()> beforeTxn_;
};

}  // namespace airlock::test
